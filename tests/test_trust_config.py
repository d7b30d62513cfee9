"""A project's ``.rune/config.toml`` comes with the code: it may only narrow what Rune does.

Before issue #12 a project file chose the model (``model = "./weights/x.gguf"`` was loaded
in-process) and could point Rune at any server on this machine. Now only an allow-list of
keys may come from it; every other key, including keys added later, is refused with one line.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import final, journals, rune
from tests.fakes.ollama_server import FakeOllama, text_reply

from rune.settings.config import KEYS, PROJECT_KEYS, LoadedConfig, load


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "home" / "proj"
    (project / ".rune").mkdir(parents=True)
    return project


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


REFUSED = {
    "backend": '"http://127.0.0.1:8080"',
    "ollama_host": '"127.0.0.1:11434"',
    "model": '"./weights/x.gguf"',
    "embedded_model": '"./weights/x.gguf"',
    "api_key": '"sk-from-the-repo"',
}


@pytest.mark.parametrize("key", list(REFUSED))
def test_a_project_file_may_not_choose_the_server_model_or_key(
    project: Path, tmp_path: Path, key: str
) -> None:
    user = tmp_path / "user.toml"
    user.write_text('backend = "scripted"\nmodel = "mine"\n')
    (project / ".rune" / "config.toml").write_text(f"{key} = {REFUSED[key]}\n")
    loaded = load({"workspace": str(project)}, env={}, user_file=user)
    assert len(loaded.refused) == 1
    assert f"ignored {key!r}" in loaded.refused[0] and "\n" not in loaded.refused[0]
    assert loaded.settings.backend == "scripted" and loaded.settings.model == "mine"
    assert loaded.settings.ollama_host is None and loaded.settings.api_key is None
    assert loaded.settings.embedded_model is None


def test_only_the_allow_list_may_come_from_a_project_file() -> None:
    # New keys default to refused: anything that loads a file or sends data elsewhere must be
    # added here on purpose, with its own check, to be settable by a project.
    assert set(PROJECT_KEYS) - {"protocol"} <= set(KEYS)
    for key in ("backend", "ollama_host", "model", "embedded_model", "api_key", "workspace"):
        assert key not in PROJECT_KEYS


def test_the_user_env_and_flags_still_choose(project: Path, tmp_path: Path) -> None:
    (project / ".rune" / "config.toml").write_text('model = "./weights/x.gguf"\n')
    loaded = load(
        {"workspace": str(project), "model": "flag-model"},
        env={"RUNE_BACKEND": "scripted"},
        user_file=tmp_path / "none.toml",
    )
    assert (loaded.settings.model, loaded.settings.backend) == ("flag-model", "scripted")


def run_with_user_config(
    project: Path, tmp_path: Path, user_file: str, **options: Any
) -> subprocess.CompletedProcess[str]:
    """``rune run hello`` in ``project`` with ``user_file`` as the user's config file."""
    user_config = tmp_path / "xdg" / "rune" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text(user_file)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), **options.pop("env", {})}
    return rune(project.parent, "run", "--workspace", str(project), "hello", env=env, **options)


def test_rune_run_ignores_a_project_backend_and_model(
    project: Path, tmp_path: Path, ollama: FakeOllama
) -> None:
    weights = project / "weights"
    weights.mkdir()
    (weights / "x.gguf").write_bytes(b"GGUF not really")
    (project / ".rune" / "config.toml").write_text(
        f'backend = "{ollama.url}"\nollama_host = "{ollama.url}"\nmodel = "./weights/x.gguf"\n'
    )
    done = run_with_user_config(project, tmp_path, 'backend = "scripted"\n', script=[final("hi")])
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 3
    for key in ("backend", "ollama_host", "model"):
        assert any(f"ignored {key!r}" in line for line in warnings)
    assert "via scripted" in done.stdout
    assert ollama.requests == []  # not one byte of the user's code went there
    assert "x.gguf" not in journals()


# --- numeric caps: a project may lower them, never raise them (issue #23) -----------------

CAPS = {"max_context": 4096, "max_output_tokens": 256, "max_iterations": 4}


def with_caps(project: Path, tmp_path: Path, key: str, value: int) -> LoadedConfig:
    """The settings of a user file with :data:`CAPS` and a project file setting ``key``."""
    user = tmp_path / "user.toml"
    user.write_text("".join(f"{k} = {v}\n" for k, v in CAPS.items()))
    (project / ".rune" / "config.toml").write_text(f"{key} = {value}\n")
    return load({"workspace": str(project)}, env={}, user_file=user)


@pytest.mark.parametrize("key", list(CAPS))
def test_a_project_file_may_not_raise_a_cap_above_the_users(
    project: Path, tmp_path: Path, key: str
) -> None:
    higher = 8 if key == "max_iterations" else 100_000_000
    loaded = with_caps(project, tmp_path, key, higher)
    assert len(loaded.refused) == 1
    line = loaded.refused[0]
    assert f"ignored {key!r}" in line and f"your {CAPS[key]}" in line and "\n" not in line
    assert loaded.settings.value(key) == CAPS[key]


@pytest.mark.parametrize("key", list(CAPS))
def test_a_project_file_may_lower_a_cap_or_set_its_own_under_the_default(
    project: Path, tmp_path: Path, key: str
) -> None:
    lower = CAPS[key] - 1
    loaded = with_caps(project, tmp_path, key, lower)
    assert loaded.refused == () and loaded.settings.value(key) == lower
    # With no user value: max_iterations is capped by its default; the others have no cap.
    loaded = load({"workspace": str(project)}, env={}, user_file=tmp_path / "none.toml")
    assert loaded.refused == () and loaded.settings.value(key) == lower


def test_a_project_cap_of_a_hundred_million_never_reaches_ollama(
    project: Path, tmp_path: Path, ollama: FakeOllama
) -> None:
    (project / ".rune" / "config.toml").write_text(
        "max_context = 100000000\nmax_output_tokens = 100000000\n"
    )
    ollama.script(text_reply("hi"))
    done = run_with_user_config(
        project,
        tmp_path,
        'backend = "ollama"\nmodel = "qwen3"\nmax_context = 4096\nmax_output_tokens = 256\n',
        env={"OLLAMA_HOST": ollama.url},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2
    for key in ("max_context", "max_output_tokens"):
        assert any(f"ignored {key!r}" in line for line in warnings)
    (body,) = ollama.bodies()
    assert body["options"]["num_ctx"] == 4096
    assert body["options"]["num_predict"] == 256
