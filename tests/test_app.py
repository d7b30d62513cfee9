"""The composition root: backend selection, the sandbox from config, sessions and shutdown."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.openai_server import MODEL_ID, FakeOpenAIServer

from rune.app import (
    BackendChoice,
    EmbeddedBackend,
    OllamaBackend,
    OpenAIBackend,
    ScriptedBackend,
    build_operator,
    choose_backend,
    no_backend_help,
    ollama_answers,
    open_rune,
    protocol_for,
    sandbox_policy,
    settings_from_header,
)
from rune.distribution import embedded_install_hint
from rune.errors import BackendUnavailable, SandboxDenied, SessionLocked
from rune.models.catalog import (
    QWEN_CODER_0_5B,
    QWEN_CODER_1_5B,
    QWEN_TURN_START,
    STAMP_SUFFIX,
    CatalogModel,
)
from rune.sessions import SessionStore
from rune.settings.config import LoadedConfig, Settings, load
from rune.tools.executor import validate_write_path


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections (the kernel's backlog) and never answers a byte."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def settings(tmp_path: Path, **values: object) -> Settings:
    return Settings(workspace=tmp_path, **values)


def configured(tmp_path: Path, flags: dict[str, object]) -> LoadedConfig:
    return load({"workspace": str(tmp_path), **flags}, env={}, user_file=tmp_path / "none.toml")


# --- backend selection ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice",
    [
        ScriptedBackend("configured"),
        OpenAIBackend("configured", "http://127.0.0.1:8080/v1"),
        EmbeddedBackend("configured", Path("/models/a model.gguf")),
    ],
)
def test_a_sessions_backend_header_brings_the_same_backend_back(
    tmp_path: Path, choice: BackendChoice
) -> None:
    restored = settings(tmp_path).model_copy(update=settings_from_header(choice.header))
    again = choose_backend(restored, probe=lambda _host: False)
    assert (again.kind, again.header) == (choice.kind, choice.header)


def test_an_ollama_header_brings_ollama_back(tmp_path: Path) -> None:
    update = settings_from_header(OllamaBackend("configured", "http://h:1").header)
    assert choose_backend(settings(tmp_path).model_copy(update=update)).kind == "ollama"


def test_ollama_answers_is_true_only_for_a_real_answer(silent_server: str) -> None:
    with FakeOllama() as ollama:
        assert ollama_answers(ollama.url)
    assert not ollama_answers(f"http://127.0.0.1:{closed_port()}")
    started = time.monotonic()
    assert not ollama_answers(silent_server, timeout=1.0)
    assert time.monotonic() - started < 2.0


def test_unset_backend_uses_ollama_when_it_answers(tmp_path: Path) -> None:
    with FakeOllama() as ollama:
        choice = choose_backend(settings(tmp_path, ollama_host=ollama.url))
    assert (choice.kind, choice.url) == ("ollama", ollama.url)
    assert "answered" in choice.reason


def test_unset_backend_without_ollama_falls_back_to_the_demo_model(tmp_path: Path) -> None:
    host = f"127.0.0.1:{closed_port()}"
    gguf = tmp_path / "demo.gguf"
    choice = choose_backend(settings(tmp_path, ollama_host=host), demo_model=lambda: gguf)
    assert (choice.kind, choice.model_path, choice.demo_model) == ("embedded", gguf, True)


def test_nothing_anywhere_says_how_to_get_a_model(tmp_path: Path) -> None:
    host = f"127.0.0.1:{closed_port()}"
    with pytest.raises(BackendUnavailable) as caught:
        choose_backend(settings(tmp_path, ollama_host=host), demo_model=lambda: None)
    message = str(caught.value)
    for hint in ("rune pull", "ollama pull", "--backend http://"):
        assert hint in message
    # Without the embedded extra, installing it comes before the pull that needs it.
    without = no_backend_help(embedded=False)
    assert without.index("ollama pull") < without.index(embedded_install_hint())
    assert without.index(embedded_install_hint()) < without.index("rune pull")
    assert no_backend_help(embedded=True).index("rune pull") < message.index("ollama pull")


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        ({"backend": "scripted"}, "scripted"),
        ({"backend": "ollama"}, "ollama"),
        ({"backend": "http://127.0.0.1:8080/v1"}, "openai"),
        ({"model": "/models/x.gguf"}, "embedded"),
        ({"backend": "embedded", "embedded_model": "/models/y.gguf"}, "embedded"),
    ],
)
def test_a_configured_backend_is_used_without_probing(
    tmp_path: Path, values: dict[str, object], kind: str
) -> None:
    def probe(host: str) -> bool:
        raise AssertionError("a configured backend must not be probed")

    assert choose_backend(settings(tmp_path, **values), probe=probe).kind == kind


def test_missing_model_file_is_backend_unavailable(tmp_path: Path) -> None:
    loaded = configured(tmp_path, {"model": str(tmp_path / "missing.gguf")})
    with pytest.raises(BackendUnavailable, match=r"missing\.gguf"), open_rune(loaded):
        pass


def fake_pull(model: CatalogModel) -> None:
    """What a finished `rune pull` leaves: the file (sparse here) at its size, and its stamp."""
    model.path.parent.mkdir(parents=True, exist_ok=True)
    with model.path.open("wb") as out:
        out.truncate(model.size)
    model.path.with_name(model.path.name + STAMP_SUFFIX).write_text(model.sha256 + "\n")


def no_demo() -> Path:
    raise AssertionError("a named model must never be swapped for the demo model")


def test_a_named_model_that_cannot_be_served_is_an_error_never_the_demo_model(
    tmp_path: Path,
) -> None:
    host = f"127.0.0.1:{closed_port()}"
    named = settings(tmp_path, ollama_host=host, model="qwen3:14b")
    with pytest.raises(BackendUnavailable) as caught:
        choose_backend(named, demo_model=no_demo)
    message = str(caught.value)
    assert "cannot run 'qwen3:14b' itself" in message
    for way_out in ("ollama serve", "--backend", "rune pull qwen2.5-coder:1.5b"):
        assert way_out in message
    # once a catalogue model is pulled, the way out is that one, not another pull
    fake_pull(QWEN_CODER_1_5B)
    with pytest.raises(BackendUnavailable) as caught:
        choose_backend(named, demo_model=no_demo)
    message = str(caught.value)
    assert "already pulled: --model qwen2.5-coder:1.5b" in message
    assert "rune pull" not in message


def test_a_named_catalogue_model_runs_embedded_once_pulled(tmp_path: Path) -> None:
    host = f"127.0.0.1:{closed_port()}"
    named = settings(tmp_path, ollama_host=host, model="qwen2.5-coder:0.5b")
    with pytest.raises(BackendUnavailable, match=r"`rune pull qwen2.5-coder:0.5b`"):
        choose_backend(named, demo_model=no_demo)
    fake_pull(QWEN_CODER_1_5B)
    with pytest.raises(BackendUnavailable, match="not pulled yet"):
        choose_backend(named, demo_model=no_demo)
    fake_pull(QWEN_CODER_0_5B)
    choice = choose_backend(named, demo_model=no_demo)
    assert (choice.kind, choice.catalog, choice.demo_model) == ("embedded", QWEN_CODER_0_5B, False)
    assert choice.model_path == QWEN_CODER_0_5B.path


def test_with_no_model_named_the_best_pulled_one_is_used_and_said(tmp_path: Path) -> None:
    host = f"127.0.0.1:{closed_port()}"
    fake_pull(QWEN_CODER_0_5B)
    fake_pull(QWEN_CODER_1_5B)
    choice = choose_backend(settings(tmp_path, ollama_host=host), demo_model=no_demo)
    assert choice.catalog == QWEN_CODER_1_5B
    assert "no model named, so the best pulled one: qwen2.5-coder:1.5b" in choice.reason


def test_ollama_serves_a_named_model_when_it_answers(tmp_path: Path) -> None:
    fake_pull(QWEN_CODER_1_5B)
    with FakeOllama() as ollama:
        named = settings(tmp_path, ollama_host=ollama.url, model="qwen2.5-coder:1.5b")
        assert choose_backend(named).kind == "ollama"


@pytest.mark.parametrize(
    ("setting", "kind", "expected"),
    [
        ("auto", "embedded", "constrained"),
        ("auto", "ollama", "auto"),
        ("auto", "openai", "auto"),
        ("native", "embedded", "native"),
        ("text", "ollama", "text"),
        ("constrained", "openai", "constrained"),
    ],
)
def test_the_protocol_rule(tmp_path: Path, setting: str, kind: str, expected: str) -> None:
    choice = {
        "embedded": EmbeddedBackend("test", None),
        "ollama": OllamaBackend("test", "http://127.0.0.1:11434"),
        "openai": OpenAIBackend("test", "http://127.0.0.1:8080/v1"),
    }[kind]
    assert protocol_for(settings(tmp_path, protocol=setting), choice) == expected


def test_generation_options_are_the_catalogue_defaults_under_the_settings(tmp_path: Path) -> None:
    from rune.transport.scripted import ScriptedTransport

    choice = EmbeddedBackend("test", QWEN_CODER_1_5B.path, QWEN_CODER_1_5B)
    transport = ScriptedTransport([])
    operator = build_operator(settings(tmp_path), choice, transport, "m")
    never = [[QWEN_TURN_START, False]]  # llama-server's "never sample this token"
    assert operator.budget.options == {
        "temperature": 0.0,
        "seed": 1,
        "num_predict": 1024,
        "logit_bias": never,
    }
    mine = settings(tmp_path, temperature=0.7, seed=42, max_output_tokens=300)
    operator = build_operator(mine, choice, transport, "m")
    assert operator.budget.options == {
        "temperature": 0.7,
        "seed": 42,
        "num_predict": 300,
        "logit_bias": never,
    }
    # a GGUF file of the user's own: Rune does not know its vocabulary, and bans nothing
    own = EmbeddedBackend("test", tmp_path / "own.gguf")
    assert build_operator(mine, own, transport, "m").budget.options == {
        "temperature": 0.7,
        "seed": 42,
        "num_predict": 300,
    }


# --- the sandbox from settings -------------------------------------------------------------


def test_the_workspace_is_writable_even_outside_home(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    policy = sandbox_policy(settings(workspace))
    assert validate_write_path("new.py", policy, workspace) == workspace.resolve() / "new.py"


def test_workspace_only_confines_reads_and_writes(tmp_path: Path) -> None:
    workspace, extra, other = tmp_path / "ws", tmp_path / "extra", tmp_path / "other"
    for d in (workspace, extra, other):
        d.mkdir()
    policy = sandbox_policy(
        settings(workspace, sandbox_workspace_only=True, sandbox_write_roots=(extra,))
    )
    assert validate_write_path(extra / "a.txt", policy, workspace)
    with pytest.raises(SandboxDenied):
        validate_write_path(other / "a.txt", policy, workspace)
    with pytest.raises(SandboxDenied):
        validate_write_path(Path.home() / "a.txt", policy, workspace)


# --- the running agent ---------------------------------------------------------------------


def test_open_rune_records_the_session_and_releases_it_on_exit(tmp_path: Path) -> None:
    loaded = configured(tmp_path, {"backend": "scripted"})
    with open_rune(loaded, title="t") as rune:
        session_id = rune.session_id
        with pytest.raises(SessionLocked):
            SessionStore().open(session_id)
    with SessionStore().open(session_id) as session:
        assert session.meta["backend"] == "scripted"
        assert session.meta["workspace"] == str(tmp_path.resolve())
        assert session.meta["title"] == "t"


def test_an_error_inside_still_releases_the_session(tmp_path: Path) -> None:
    loaded = configured(tmp_path, {"backend": "scripted"})
    with pytest.raises(RuntimeError), open_rune(loaded) as rune:
        session_id = rune.session_id
        raise RuntimeError("boom")
    SessionStore().open(session_id).close()


def test_openai_compatible_backend_picks_the_served_model(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        loaded = configured(tmp_path, {"backend": server.base_url})
        with open_rune(loaded) as rune:
            assert rune.model == MODEL_ID
            assert rune.backend == OpenAIBackend("configured", server.base_url)


def test_a_resumed_session_keeps_its_backend_and_model(tmp_path: Path) -> None:
    with open_rune(configured(tmp_path, {"backend": "scripted", "model": "m1"})) as rune:
        session_id = rune.session_id
    loaded = load({"workspace": None}, env={}, user_file=tmp_path / "none.toml")
    with open_rune(loaded, session_id=session_id) as resumed:
        assert (resumed.backend.kind, resumed.model) == ("scripted", "m1")
        assert resumed.settings.workspace == tmp_path.resolve()
