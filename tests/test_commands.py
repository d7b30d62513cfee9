"""run_command: approval first, process groups and timeouts, capped output, bubblewrap."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest

from rune.errors import CommandFailed, ToolError
from rune.tools.commands import HEAD_BYTES, TAIL_BYTES, find_bwrap
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.spec import PreparedChange

BWRAP = find_bwrap()
needs_bwrap = pytest.mark.bwrap


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def executor(ws: Path, contain: bool | None) -> ToolExecutor:
    return ToolExecutor(SandboxPolicy.workspace_only(ws), ws, contain_commands=contain)


def run(ex: ToolExecutor, command: str, timeout: int = 20) -> str:
    """What the command printed and how it ended, whether it passed or failed."""
    try:
        return ex.apply(ex.prepare("run_command", {"command": command, "timeout": timeout}))
    except CommandFailed as failed:
        return str(failed)


@pytest.mark.parametrize("contain", [False, pytest.param(True, marks=needs_bwrap)])
def test_prepare_runs_nothing_and_apply_runs_in_the_workspace(ws: Path, contain: bool) -> None:
    ex = executor(ws, contain)
    change = ex.prepare("run_command", {"command": "pwd; touch marker; exit 3"})
    assert not (ws / "marker").exists()
    assert change.contained is contain
    assert change.preview.startswith("$ pwd; touch marker; exit 3\n")
    with pytest.raises(CommandFailed) as failed:
        ex.apply(change)
    assert failed.value.exit_code == 3
    assert str(failed.value).splitlines() == [str(ws), "[exit code 3]"]
    assert (ws / "marker").exists()


def test_uncontained_preview_says_so_plainly(ws: Path) -> None:
    change = executor(ws, False).prepare("run_command", {"command": "ls"})
    assert change.contained is False
    assert "NOT contained" in change.preview and "full user rights" in change.preview


def test_required_containment_without_bwrap_refuses(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(ws))
    with pytest.raises(ToolError, match="must run contained"):
        executor(ws, True).prepare("run_command", {"command": "ls"})
    assert executor(ws, None).prepare("run_command", {"command": "ls"}).contained is False


def test_command_text_is_shown_with_hidden_characters_escaped(ws: Path) -> None:
    change = executor(ws, False).prepare(
        "run_command", {"command": "echo safe\r\x1b[2Krm -rf ~ \u202e"}
    )
    assert "\x1b" not in change.preview and "\r" not in change.preview
    assert "$ echo safe\\x0d\\x1b[2Krm -rf ~ \\u202e" in change.preview
    assert "3 control or invisible character(s)" in change.preview


def test_an_altered_change_is_not_run(ws: Path) -> None:
    ex = executor(ws, False)
    change = ex.prepare("run_command", {"command": "echo approved"})
    forged = PreparedChange.from_json({**change.to_json(), "arguments": {"command": "touch x"}})
    with pytest.raises(ToolError, match="changed since it was approved"):
        ex.apply(forged)
    assert not (ws / "x").exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.parametrize("contain", [False, pytest.param(True, marks=needs_bwrap)])
def test_timeout_kills_the_whole_process_group(ws: Path, contain: bool) -> None:
    started = time.monotonic()
    out = run(executor(ws, contain), "sleep 60 & echo started; sleep 60; echo never", timeout=1)
    assert time.monotonic() - started < 10
    assert out.splitlines() == [
        "started",
        "[timed out after 1 s; it and everything it started were killed]",
    ]


def test_background_children_do_not_outlive_the_command(ws: Path) -> None:
    out = run(executor(ws, False), "sleep 60 & echo $!")
    pid = int(out.splitlines()[0])
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_output_is_capped_keeping_head_and_tail(ws: Path) -> None:
    script = "import sys\nfor i in range(20000): print(f'line {i}')\n"
    (ws / "loud.py").write_text(script)
    out = run(executor(ws, False), f"{sys.executable} loud.py")
    total = sum(len(f"line {i}\n") for i in range(20000))
    assert out.startswith("line 0\nline 1\n")
    assert "line 19999\n[exit code 0]" in out
    cut = total - HEAD_BYTES - TAIL_BYTES
    assert f"[... {cut} bytes cut from the middle" in out
    assert len(out) < HEAD_BYTES + TAIL_BYTES + 500


@needs_bwrap
def test_contained_commands_write_only_inside_the_write_roots(tmp_path: Path, ws: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    out = run(
        executor(ws, True),
        f"echo in > inside.txt; echo out > {outside}/leak.txt; echo x > /usr/leak.txt; "
        'echo scratch > "$TMPDIR/t" && cat "$TMPDIR/t"',
    )
    assert (ws / "inside.txt").read_text() == "in\n"
    assert list(outside.iterdir()) == [] and not Path("/usr/leak.txt").exists()
    # The host's /tmp is not there (a private one is, the TMPDIR); the system is read-only.
    assert f"{outside}/leak.txt: No such file or directory" in out
    assert "/usr/leak.txt: Read-only file system" in out and "scratch\n" in out


@needs_bwrap
def test_contained_commands_have_no_network(ws: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        out = run(executor(ws, True), f'{sys.executable} -c "{probe}"')
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()
    assert "[exit code 1]" in out
    assert "refused" in out or "unreachable" in out.lower()


@needs_bwrap
def test_contained_commands_cannot_change_existing_protected_files(ws: Path) -> None:
    hooks = ws / "repo" / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\n")
    (ws / ".envrc").write_text("export A=1\n")
    out = run(
        executor(ws, True),
        "echo evil >> repo/.git/hooks/pre-commit; echo evil > .envrc; echo ok > repo/f.txt",
    )
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\n"
    assert (ws / ".envrc").read_text() == "export A=1\n"
    assert (ws / "repo" / "f.txt").read_text() == "ok\n"
    assert out.count("Read-only file system") == 2


@needs_bwrap
def test_creating_a_missing_protected_file_is_reported(ws: Path) -> None:
    out = run(executor(ws, True), "echo 'export X=1' > .envrc")
    assert "WARNING: the command created (or replaced) protected path(s)" in out
    assert ".envrc" in out


def test_empty_or_nul_commands_are_refused(ws: Path) -> None:
    ex = executor(ws, False)
    for bad in ("   ", "echo a\x00b"):
        with pytest.raises(ToolError):
            ex.prepare("run_command", {"command": bad})


def test_bwrap_is_found_where_installed() -> None:
    assert (BWRAP is None) == (shutil.which("bwrap") is None)


@needs_bwrap
def test_contained_commands_write_only_the_workspace_not_every_write_root(tmp_path: Path) -> None:
    # The file tools may write all of home; a command, whose writes nobody previews, may not:
    # otherwise it could plant a git hook in another project that later runs uncontained.
    home = tmp_path / "home"
    project, other = home / "project", home / "other"
    (other / ".git" / "hooks").mkdir(parents=True)
    project.mkdir()
    policy = SandboxPolicy(read_roots=[home], write_roots=[home])
    ex = ToolExecutor(policy, project, contain_commands=True)
    out = run(
        ex,
        f"echo ok > inside.txt; echo x > {other}/.git/hooks/pre-commit; echo x > {home}/.bashrc",
    )
    assert (project / "inside.txt").read_text() == "ok\n"
    assert not (other / ".git/hooks/pre-commit").exists()
    assert not (home / ".bashrc").exists()
    # The rest of home is not there: the other project's hook cannot even be named; the
    # private home takes the .bashrc and forgets it.
    assert f"{other}/.git/hooks/pre-commit: No such file or directory" in out
