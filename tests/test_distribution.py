"""Rune's own name on PyPI, and ``rune --version`` naming the commit of a git checkout.

The version tests run ``python -m rune.cli`` against a copy of ``src/rune`` in a throw-away
git repository (first on PYTHONPATH), so they do not depend on the state of this checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rune import __version__
from rune.distribution import DISTRIBUTION, embedded_install_hint

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src" / "rune"
GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    )
    return done.stdout.strip()


def copy_of_rune(root: Path) -> Path:
    """``root/src/rune`` and ``root/pyproject.toml``: the shape of a Rune checkout."""
    shutil.copytree(SRC, root / "src" / "rune", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def rune_version(
    root: Path, cwd: Path, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "rune.cli", "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=30,
        check=False,
    )


@needs_git
def test_version_names_the_commit_and_whether_tracked_files_changed(tmp_path: Path) -> None:
    root = copy_of_rune(tmp_path / "checkout")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a checkout")
    head = git(root, "rev-parse", "--short", "HEAD")

    clean = rune_version(root, cwd=tmp_path)
    assert (clean.returncode, clean.stdout) == (0, f"rune {__version__} (commit {head})\n")

    (root / "notes.txt").write_text("untracked files do not count\n")
    assert rune_version(root, cwd=tmp_path).stdout == clean.stdout

    with (root / "pyproject.toml").open("a") as changed:
        changed.write("# a local change\n")
    modified = rune_version(root, cwd=tmp_path)
    assert modified.stdout == f"rune {__version__} (commit {head}, modified)\n"


def test_version_outside_a_checkout_is_the_bare_version(tmp_path: Path) -> None:
    root = copy_of_rune(tmp_path / "unpacked")  # an unpacked sdist: no .git
    done = rune_version(root, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"rune {__version__}\n")


@needs_git
def test_version_without_git_on_path_is_the_bare_version(tmp_path: Path) -> None:
    root = copy_of_rune(tmp_path / "checkout")
    git(root, "init", "-q")
    done = rune_version(root, cwd=tmp_path, path=str(tmp_path / "empty-bin"))
    assert (done.returncode, done.stdout, done.stderr) == (0, f"rune {__version__}\n", "")


@needs_git
def test_only_version_runs_git(tmp_path: Path) -> None:
    """``rune --help`` and a command's help stay fast: git runs for ``--version`` alone."""
    assert GIT is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git.log"
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{GIT}" "$@"\n')
    wrapper.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path}
    for args in (["--help"], ["demo", "--help"], []):
        subprocess.run(
            [sys.executable, "-m", "rune.cli", *args],
            capture_output=True,
            env=env,
            cwd=REPO,
            timeout=30,
            check=False,
        )
    assert not log.exists()
    root = copy_of_rune(tmp_path / "checkout")
    git(root, "init", "-q")
    rune_version(root, cwd=tmp_path, path=path)
    assert "rev-parse" in log.read_text()


def test_the_hint_names_the_distribution_pyproject_builds() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    assert "embedded" in project["optional-dependencies"]
    assert list(project["optional-dependencies"]["embedded"]) == ["xllamacpp==2026.10.11549"]
    assert project["scripts"] == {"rune": "rune.cli:main"}


def test_nothing_tells_users_to_install_the_other_projects_rune() -> None:
    """``rune`` on PyPI is a secrets manager: no hint or README line may install it."""
    wrong = re.compile(r"(?<![\w.-])rune\[(embedded|dev)\]")
    files = [*SRC.rglob("*.py"), REPO / "README.md", *(REPO / "scripts").iterdir()]
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if wrong.search(line)
    ]
    assert found == []


def test_readme_installs_the_wheel_this_version_builds() -> None:
    readme = (REPO / "README.md").read_text()
    wheel = f"{DISTRIBUTION.replace('-', '_')}-{__version__}-py3-none-any.whl"
    assert f"pipx install 'dist/{wheel}[embedded]'" in readme
    assert f"uv tool install 'dist/{wheel}[embedded]'" in readme


# --- adding an extra: the hint that works for how Rune was installed ---------------------------


def installed_as(root: Path, marker: str | None, *, without: str) -> Path:
    """A virtualenv laid out as ``marker`` leaves one (pipx, uv tool; None: a plain one) that
    runs this checkout's Rune and its dependencies, but where the module ``without`` (an
    extra's) cannot be imported, as when the extra was never installed. Its interpreter."""
    where = {"pipx_metadata.json": "pipx/venvs/rune-agent", "uv-receipt.toml": "uv/tools/x"}
    venv = root / where.get(marker or "", "project/.venv")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    if marker:
        (venv / marker).write_text("{}\n" if marker.endswith(".json") else "[tool]\n")
    missing = root / "missing"
    missing.mkdir()
    (missing / f"{without}.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{without}'\", name={without!r})\n"
    )
    site = next(venv.glob("lib/python3*/site-packages"))
    here = [p for p in sys.path if p.endswith("site-packages")]
    (site / "rune_test.pth").write_text("\n".join([str(missing), str(REPO / "src"), *here]))
    return venv / "bin" / "python"


@pytest.mark.parametrize(
    ("marker", "says"),
    [
        ("pipx_metadata.json", "pipx inject rune-agent 'agent-client-protocol"),
        ("uv-receipt.toml", "uv tool install --force --with 'agent-client-protocol"),
        (None, "-m pip install 'agent-client-protocol"),
    ],
)
def test_rune_acp_without_its_extra_says_how_to_add_it_to_this_install(
    home: Path, marker: str | None, says: str
) -> None:
    python = installed_as(home.parent, marker, without="acp")
    done = subprocess.run(
        [str(python), "-m", "rune.cli", "acp"],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home), "NO_COLOR": "1", "COLUMNS": "400"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    if marker is None:
        assert str(python.parent.parent) in done.stderr  # the pip of Rune's own environment


def test_an_mcp_server_without_the_extra_says_how_to_add_it_to_a_pipx_install(home: Path) -> None:
    python = installed_as(home.parent, "pipx_metadata.json", without="mcp")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "rune" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[mcp.servers.time]\ncommand = "mcp-server-time"\n')
    done = subprocess.run(
        [str(python), "-m", "rune.cli", "mcp", "--workspace", str(home)],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home), "NO_COLOR": "1", "COLUMNS": "400"},
        timeout=60,
        check=False,
    )
    said = done.stdout + done.stderr
    assert "the mcp package is not installed" in said, said
    assert "pipx inject rune-agent 'mcp" in said, said


@pytest.mark.parametrize(
    ("layout", "receipt", "hint"),
    [
        ("pipx", "", "pipx inject rune-agent xllamacpp==2026.10.11549"),
        (
            "uv",
            '[tool]\nrequirements = [{ name = "rune-agent", directory = "/src/my rune" }]\n',
            "uv tool install --force --with xllamacpp==2026.10.11549 '/src/my rune'",
        ),
        (
            "uv",
            '[tool]\nrequirements = [{ name = "rune-agent" }]\n',
            "xllamacpp==2026.10.11549 rune-agent",
        ),
        ("uv", "not toml [", "xllamacpp==2026.10.11549 rune-agent"),
        ("venv", "", "/.venv/bin/python -m pip install xllamacpp=="),
    ],
)
def test_the_embedded_hint_follows_how_rune_was_installed(
    tmp_path: Path, layout: str, receipt: str, hint: str
) -> None:
    """From the second newcomer tour: the hint began with a PyPI install of Rune, which a
    Rune installed from a clone (pipx, uv tool, the clone's venv) does not want."""
    prefix = tmp_path / {"pipx": "pipx/venvs/rune-agent", "uv": "uv/tools/x"}.get(layout, ".venv")
    prefix.mkdir(parents=True)
    if layout == "pipx":
        (prefix / "pipx_metadata.json").write_text("{}")
    if layout == "uv":
        (prefix / "uv-receipt.toml").write_text(receipt)
    said = embedded_install_hint(prefix)
    assert hint in said, said
    assert "\n" not in said and " or " not in said  # one way, the one that fits
    assert f"'{DISTRIBUTION}[embedded]'" not in said
