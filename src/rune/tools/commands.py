"""run_command: a shell command, always approved first, contained by bubblewrap where it works.

Inside bwrap the whole filesystem is read-only except the policy's write roots, existing
protected files under them are re-bound read-only, there is no network, a private scratch
TMPDIR and /proc, and a new PID namespace that dies with Rune. A protected name that does not
exist yet cannot be masked without creating it on the real disk, so Rune watches the usual
locations and reports any the command created. Without bwrap the preview says plainly that
the command runs with the user's full rights. Either way the command runs in the workspace, in
its own process group, and a timeout kills the whole group.
"""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rune.errors import ToolError, ToolInputError
from rune.messages import thaw
from rune.tools.base import Args, BuiltinTool, ToolContext, integer_arg, object_schema, string_arg
from rune.tools.display import escape_hidden, for_display, hidden_note
from rune.tools.sandbox import (
    GIT_CONTROL_NAMES,
    PROTECTED_NAMES,
    PROTECTED_SEQUENCES,
    SandboxPolicy,
    within,
)
from rune.tools.spec import PreparedChange, ToolSpec

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 1800
HEAD_BYTES = 8 * 1024
TAIL_BYTES = 8 * 1024
# After the shell exits, how long leftover background processes may keep the pipe open.
EXIT_GRACE = 0.5
MAX_PROTECTED_BINDS = 512
SCAN_DEPTH = 4
SCAN_DIRS = 2000


# --- bubblewrap ------------------------------------------------------------------------------


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def sandbox_probe(bwrap: str) -> str | None:
    """Why ``bwrap`` cannot build the sandbox here (user namespaces may be disabled), or None
    when it can: the same flags a command gets, around ``true``."""
    probe = [bwrap, *_isolation_flags(), *_BASE_MOUNTS, "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{bwrap} could not start: {err}"
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
        return f"{bwrap} is installed but cannot create a sandbox here: {reason}"
    return None


def bwrap_works(bwrap: str) -> bool:
    return sandbox_probe(bwrap) is None


def containment_report() -> tuple[bool, str]:
    """Whether commands would run contained here, and what was found (for ``rune doctor``)."""
    bwrap = find_bwrap()
    if bwrap is None:
        return False, "bubblewrap (bwrap) is not installed"
    problem = sandbox_probe(bwrap)
    return (False, problem) if problem else (True, f"{bwrap} works")


def containment(ctx: ToolContext) -> str | None:
    """The bwrap binary commands will run under, or None when they run uncontained."""
    if ctx.contain_commands is False:
        return None
    bwrap = find_bwrap()
    if bwrap is not None and bwrap_works(bwrap):
        return bwrap
    if ctx.contain_commands:
        raise ToolError(
            "commands must run contained, but bubblewrap (bwrap) is missing or cannot create "
            "a sandbox here; nothing was run."
        )
    return None


# Order matters: mounts apply in sequence, and /dev and /proc must come after the root bind,
# or the host's (nodev) view of /dev covers the fresh one.
_BASE_MOUNTS = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
#: the private, writable scratch directory of a contained command (its TMPDIR)
SCRATCH_DIR = "/var/tmp"


def _isolation_flags() -> list[str]:
    flags = [
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        # A new session: the command cannot push keystrokes into Rune's terminal (TIOCSTI).
        "--new-session",
    ]
    if os.geteuid() == 0:
        flags += ["--cap-drop", "ALL"]
    return flags


def _protected_candidates(root: Path) -> list[Path]:
    return [root / n for n in sorted(PROTECTED_NAMES)] + [
        root.joinpath(*seq) for seq in PROTECTED_SEQUENCES
    ]


def _scan_protected(top: Path, policy: SandboxPolicy) -> list[Path]:
    """Existing protected paths below ``top``, breadth-first within a small budget."""
    found: list[Path] = []
    queue: list[tuple[Path, int]] = [(top, 0)]
    visited = 0
    while queue and visited < SCAN_DIRS:
        here, depth = queue.pop(0)
        visited += 1
        try:
            with os.scandir(here) as scan:
                entries = list(scan)
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.name == ".git" and entry.is_dir(follow_symlinks=False):
                found += [path / name for name in sorted(GIT_CONTROL_NAMES)]
            elif (
                policy.protected_hit(path) is not None
                or policy.credential_hit(path, reading=False) is not None
            ):
                found.append(path)
            elif entry.is_dir(follow_symlinks=False) and depth < SCAN_DEPTH:
                queue.append((path, depth + 1))
    return found


def protected_binds(policy: SandboxPolicy, workspace: Path) -> tuple[list[Path], list[Path]]:
    """(existing protected paths to re-bind read-only, missing ones to watch)."""
    candidates: list[Path] = []
    for root in policy.write_roots:
        candidates += _protected_candidates(root)
    candidates += _protected_candidates(workspace) + list(policy.protected_paths)
    if within(workspace, policy.write_roots):
        candidates += _scan_protected(workspace, policy)
    binds: dict[Path, None] = {}
    watch: list[Path] = []
    for path in dict.fromkeys(candidates):
        if not os.path.lexists(path):
            watch.append(path)
            continue
        real = Path(os.path.realpath(path))
        if within(real, policy.write_roots):
            binds[real] = None
    return list(binds)[:MAX_PROTECTED_BINDS], watch


def bwrap_argv(
    bwrap: str, policy: SandboxPolicy, workspace: Path, read_only: Iterable[Path]
) -> list[str]:
    """The bwrap prefix: read-only root, a private scratch TMPDIR, writable roots, protected
    paths re-bound read-only."""
    # The real /tmp stays visible and read-only, as the policy says (a tool or a virtualenv
    # may live there); scratch files go to a private tmpfs that TMPDIR points at.
    argv = [bwrap, *_isolation_flags(), *_BASE_MOUNTS]
    argv += ["--tmpfs", SCRATCH_DIR, "--setenv", "TMPDIR", SCRATCH_DIR]
    # Only the workspace is writable for a command, even when the file tools may write all of
    # home: a command's writes are not previewed, and a home-wide bind would let it plant git
    # hooks or rc files in any other project, to run later outside the sandbox.
    if within(workspace, policy.write_roots) and workspace.is_dir():
        argv += ["--bind", str(workspace), str(workspace)]
    for path in read_only:
        argv += ["--ro-bind", str(path), str(path)]
    return [*argv, "--chdir", str(workspace), "--"]


# --- running ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    exit_code: int | None
    timed_out: bool
    head: bytes
    tail: bytes
    total: int


class _CappedOutput:
    """Keeps the first HEAD_BYTES and the last TAIL_BYTES of a stream, and its length."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = HEAD_BYTES - len(self.head)
        self.head += chunk[:room]
        self.tail += chunk[room:] if room > 0 else chunk
        del self.tail[:-TAIL_BYTES]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def supervised(argv: list[str], control_fd: int) -> list[str]:
    """``argv`` under the subreaper supervisor (:mod:`rune.tools.reaper`), which kills every
    descendant when the command ends or ``control_fd``'s other end closes."""
    from rune.tools.reaper import SOURCE

    return [sys.executable, "-I", "-c", SOURCE, str(control_fd), str(EXIT_GRACE), *argv]


def run_captured(
    argv: list[str],
    cwd: Path,
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    supervise: bool = False,
    pass_fds: tuple[int, ...] = (),
) -> Outcome:
    """Run ``argv`` in its own process group; stdout and stderr together, capped.

    ``supervise``: run it under the subreaper supervisor, so that nothing it starts outlives
    it, ``setsid`` children included (for commands that no PID namespace contains).
    """
    control: int | None = None
    fds = pass_fds
    if supervise and sys.executable:
        read_end, control = os.pipe()
        argv, fds = supervised(argv, read_end), (*pass_fds, read_end)
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=None if env is None else dict(env),
            pass_fds=fds,
        )
    except OSError as err:
        if control is not None:
            os.close(control)
        raise ToolError(f"cannot start the command: {err.strerror or err}.") from None
    finally:
        if control is not None:
            os.close(fds[-1])
    assert proc.stdout is not None
    output = _CappedOutput()
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        with proc.stdout, selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            fd = proc.stdout.fileno()
            while True:
                now = time.monotonic()
                if proc.poll() is not None:
                    deadline = min(deadline, now + EXIT_GRACE)
                if now >= deadline:
                    timed_out = proc.returncode is None
                    break
                if selector.select(timeout=min(deadline - now, 0.2)):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    output.add(chunk)
            if control is not None:
                # The supervisor kills the command's whole tree and exits.
                os.close(control)
                control = None
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
    finally:
        if control is not None:
            os.close(control)
        # Whatever is left of the group (background jobs, a timed-out command) goes now.
        _kill_group(proc.pid)
        proc.wait()
    code = None if timed_out else proc.returncode
    return Outcome(code, timed_out, bytes(output.head), bytes(output.tail), output.total)


def format_outcome(outcome: Outcome, timeout: float) -> str:
    cut = outcome.total - len(outcome.head) - len(outcome.tail)
    parts = [outcome.head.decode("utf-8", "replace")]
    if cut > 0:
        parts.append(
            f"\n[... {cut} bytes cut from the middle; showing the first {len(outcome.head)} "
            f"and the last {len(outcome.tail)} of {outcome.total} bytes ...]\n"
        )
    parts.append(outcome.tail.decode("utf-8", "replace"))
    text, hidden = escape_hidden("".join(parts).rstrip("\n"))
    if outcome.timed_out:
        status = f"[timed out after {timeout:g} s; it and everything it started were killed]"
    else:
        status = f"[exit code {outcome.exit_code}]"
    return "\n".join(p for p in (text or "(no output)", hidden_note(hidden), status) if p)


# --- the tool --------------------------------------------------------------------------------


def _checked_command(args: Args) -> tuple[str, int]:
    command = str(args["command"])
    if not command.strip():
        raise ToolInputError("command is empty.")
    if "\0" in command:
        raise ToolInputError("command contains a NUL byte, which no shell can run.")
    return command, int(args.get("timeout", DEFAULT_TIMEOUT))


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


def _preview(ctx: ToolContext, command: str, timeout: int, bwrap: str | None) -> str:
    shown, hidden = escape_hidden(command, keep="\n")
    lines = [f"$ {shown}"]
    if hidden:
        lines.append(hidden_note(hidden))
    lines.append(f"in {for_display(str(ctx.workspace))}, timeout {timeout} s")
    if bwrap is not None:
        lines.append(
            "Contained (bubblewrap): no network; writes only inside the workspace and a "
            "private TMPDIR; protected files near the top of the workspace (git hooks and "
            "config, rc files, IDE and agent config) are read-only."
        )
    else:
        lines.append(
            "NOT contained: bubblewrap is not available, so this command runs with your full "
            "user rights. It can read, change or send anything you can."
        )
    return "\n".join(lines)


def prepare_command(ctx: ToolContext, args: Args) -> PreparedChange:
    command, timeout = _checked_command(args)
    bwrap = containment(ctx)
    first_line = escape_hidden(command.strip().splitlines()[0], keep="")[0]
    return PreparedChange(
        tool="run_command",
        arguments=args,
        summary=f"run_command: {first_line[:80]}",
        preview=_preview(ctx, command, timeout, bwrap),
        fingerprint={
            "command": command,
            "cwd": str(ctx.workspace),
            "timeout": timeout,
            "contained": bwrap is not None,
        },
        contained=bwrap is not None,
    )


def run_approved(ctx: ToolContext, change: PreparedChange) -> tuple[Outcome, list[Path]]:
    """Run an approved command exactly as prepared (contained when it said so).

    Returns its outcome and the protected paths it created that did not exist before.
    """
    fresh = prepare_command(ctx, change.arguments)
    if thaw(fresh.fingerprint) != thaw(change.fingerprint):
        raise ToolError(
            "the command, its directory or its containment changed since it was approved; "
            "nothing was run."
        )
    command, timeout = str(fresh.fingerprint["command"]), int(fresh.fingerprint["timeout"])
    bwrap = containment(ctx)  # its probe is cached; prepare_command just asked it
    argv = [_shell(), "-c", command]
    watch: list[Path] = []
    if bwrap is not None:
        read_only, watch = protected_binds(ctx.policy, ctx.workspace)
        argv = [*bwrap_argv(bwrap, ctx.policy, ctx.workspace, read_only), *argv]
    outcome = run_captured(argv, ctx.workspace, timeout, supervise=bwrap is None)
    return outcome, [p for p in watch if os.path.lexists(p)]


def apply_command(ctx: ToolContext, change: PreparedChange) -> str:
    outcome, created = run_approved(ctx, change)
    report = format_outcome(outcome, int(change.fingerprint["timeout"]))
    if created:
        names = ", ".join(for_display(str(p), keep="") for p in created)
        report += (
            f"\nWARNING: the command created protected path(s) {names}. The sandbox cannot "
            "stop a command creating a protected file that did not exist; review them."
        )
    return report


RUN_COMMAND = BuiltinTool(
    ToolSpec(
        "run_command",
        "Run a shell command in the workspace (bash -c). Always needs the user's approval. "
        "Output is capped; a timeout kills the command and everything it started.",
        object_schema(
            {
                "command": string_arg("The shell command to run."),
                "timeout": integer_arg(
                    f"Seconds before it is killed. Default {DEFAULT_TIMEOUT}.",
                    minimum=1,
                    maximum=MAX_TIMEOUT,
                ),
            },
            ["command"],
        ),
        mutating=True,
    ),
    prepare=prepare_command,
    apply=apply_command,
)
