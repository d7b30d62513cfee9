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
from rune.distribution import DISTRIBUTION, EMBEDDED_INSTALL_HINT

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
    assert f"'{DISTRIBUTION}[embedded]'" in EMBEDDED_INSTALL_HINT
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
