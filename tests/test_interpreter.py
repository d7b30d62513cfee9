"""The environment a model's command gets: the project's Python first, Rune's own nowhere
(issue 25). The CLI case, contained, is in test_cli_truthful.py; here the rule itself, and an
uncontained command as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rune.errors import CommandFailed
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.interpreter import project_environment, project_python


def make_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    return where


def test_runes_environment_leaves_path_and_virtual_env(tmp_path: Path) -> None:
    own = tmp_path / "rune-venv"
    environ = {
        "PATH": os.pathsep.join([str(own / "bin"), "/usr/local/bin", "/usr/bin"]),
        "VIRTUAL_ENV": str(own),
        "HOME": "/home/u",
    }
    env = project_environment(environ, tmp_path, own=own)
    assert env["PATH"].split(os.pathsep) == ["/usr/local/bin", "/usr/bin"]
    assert "VIRTUAL_ENV" not in env
    assert env["HOME"] == "/home/u"
    assert environ["VIRTUAL_ENV"] == str(own)  # the caller's mapping is left alone


def test_the_projects_venv_comes_first_and_another_activated_one_stays_behind(
    tmp_path: Path,
) -> None:
    venv = make_venv(tmp_path / ".venv")
    other = tmp_path / "other-venv"
    environ = {
        "PATH": os.pathsep.join([str(other / "bin"), str(venv / "bin"), "/usr/bin"]),
        "VIRTUAL_ENV": str(other),
    }
    env = project_environment(environ, tmp_path, own=tmp_path / "rune-venv")
    assert env["PATH"].split(os.pathsep) == [str(venv / "bin"), str(other / "bin"), "/usr/bin"]
    assert env["VIRTUAL_ENV"] == str(venv)
    assert project_python(environ, tmp_path) == str(venv / "bin" / "python3")


def test_a_venv_without_a_python_is_not_the_projects(tmp_path: Path) -> None:
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    env = project_environment({"PATH": "/usr/bin"}, tmp_path, own=None)
    assert env == {"PATH": "/usr/bin"}


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="Rune runs from no venv of its own")
def test_an_uncontained_command_runs_the_projects_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rune's own environment activated in the shell that started it.
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    ex = ToolExecutor(SandboxPolicy.workspace_only(tmp_path), tmp_path, contain_commands=False)
    command = {
        "command": "python3 -c 'import os, sys; print(sys.prefix, os.environ.get(\"VIRTUAL_ENV\"))'"
    }

    def prefix() -> str:
        try:
            output = ex.apply(ex.prepare("run_command", command))
        except CommandFailed as failed:  # no python3 other than Rune's: it is not run then
            output = str(failed)
        return output.splitlines()[0]

    without = prefix()
    assert without.split()[0] != sys.prefix and not without.endswith(sys.prefix)
    venv = make_venv(tmp_path / ".venv")
    assert prefix() == f"{venv} {venv}"


# --- a version manager's shim -------------------------------------------------------------------

ELF = b"\x7fELF\x02\x01\x01" + bytes(57)


def fake_pyenv(root: Path, *installed: str) -> Path:
    """A pyenv tree: its python3 shim (a script) and each version's python3 (a program)."""
    (root / "shims").mkdir(parents=True)
    (root / "shims" / "python3").write_text('#!/usr/bin/env bash\nexec pyenv exec "$@"\n')
    for version in installed:
        program = root / "versions" / version / "bin" / "python3"
        program.parent.mkdir(parents=True)
        program.write_bytes(ELF)
    for path in (root / "shims" / "python3", *root.glob("versions/*/bin/python3")):
        path.chmod(0o755)
    return root


def system_python(where: Path) -> Path:
    program = where / "python3"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_bytes(ELF)
    program.chmod(0o755)
    return program


def test_a_pyenv_shim_stands_for_the_version_pyenv_picks_in_the_workspace(tmp_path: Path) -> None:
    root = fake_pyenv(tmp_path / "pyenv", "3.11.7", "3.12.1", "3.12.10")
    system = system_python(tmp_path / "usr-bin")
    workspace = tmp_path / "project"
    workspace.mkdir()
    environ = {"PATH": os.pathsep.join([str(root / "shims"), str(system.parent)])}
    # the global choice, then a workspace's own (a prefix: the latest installed it starts)
    (root / "version").write_text("3.11.7\n")
    assert project_python(environ, workspace) == str(root / "versions/3.11.7/bin/python3")
    (workspace / ".python-version").write_text("# pinned\n3.12\n")
    assert project_python(environ, workspace) == str(root / "versions/3.12.10/bin/python3")
    # PYENV_VERSION wins; `system` is the next python3 on PATH
    pinned = {**environ, "PYENV_VERSION": "3.12.1"}
    assert project_python(pinned, workspace) == str(root / "versions/3.12.1/bin/python3")
    assert project_python({**environ, "PYENV_VERSION": "system"}, workspace) == str(system)


def test_a_cloned_python_version_file_cannot_pick_a_program_outside_pyenv(tmp_path: Path) -> None:
    root = fake_pyenv(tmp_path / "pyenv", "3.11.7")
    (root / "version").write_text("3.11.7\n")
    system = system_python(tmp_path / "usr-bin")
    evil = system_python(tmp_path / "evil" / "bin")
    workspace = tmp_path / "project"
    workspace.mkdir()
    environ = {"PATH": os.pathsep.join([str(root / "shims"), str(system.parent)])}
    for planted in (f"../../evil\n{evil}\n", "/tmp\n", "..\n"):
        (workspace / ".python-version").write_text(planted)
        assert project_python(environ, workspace) == str(system), planted
    # a version whose python3 links out of pyenv's tree is not taken either
    linked = root / "versions" / "3.13.0" / "bin"
    linked.mkdir(parents=True)
    (linked / "python3").symlink_to(evil)
    (workspace / ".python-version").write_text("3.13.0\n")
    assert project_python(environ, workspace) == str(system)


def test_a_fifo_named_python3_is_passed_over_without_blocking(tmp_path: Path) -> None:
    trap = tmp_path / "trap"
    trap.mkdir()
    os.mkfifo(trap / "python3")
    (trap / "python3").chmod(0o755)
    system = system_python(tmp_path / "usr-bin")
    environ = {"PATH": os.pathsep.join([str(trap), str(system.parent)])}
    assert project_python(environ, tmp_path) == str(system)
