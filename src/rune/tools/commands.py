"""run_command: a shell command, always approved first, contained by bubblewrap where it works.

Inside bwrap (:mod:`rune.tools.containment` says exactly what it sees) there is no network and
no socket but IP and netlink; nothing of the host but the system directories, the workspace,
the interpreters it needs and what the user's config adds (home is private and empty); the
environment is an allow-list; the filesystem is read-only except the workspace and a
size-capped private /tmp; every ``.git`` is read-only except what a commit in the top-level
repository needs, protected files are re-bound read-only, resource limits apply
(:mod:`rune.tools.run_limits`), and a new PID namespace dies with Rune. A protected name that
does not exist yet cannot be masked without creating it on the real disk, so Rune scans the
workspace after the command and reports what it created (git control files created in the top
``.git`` are removed). Without bwrap the preview says plainly that the command runs with the
user's full rights, and it runs under a child-subreaper supervisor (:mod:`rune.tools.reaper`),
so that nothing it starts, ``setsid`` children included, outlives it. Either way the command
runs in the workspace, in its own process group, and a timeout kills it and everything it
started.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rune.errors import CommandFailed, ToolError, ToolInputError
from rune.messages import thaw
from rune.stop import stop_requested
from rune.text import NO_OUTPUT
from rune.tools.base import Args, BuiltinTool, ToolContext, integer_arg, object_schema, string_arg
from rune.tools.containment import (
    Plan,
    after_run,
    base_mounts,
    contained_environment,
    plan_mounts,
    summary,
)
from rune.tools.display import escape_hidden, for_display, hidden_note
from rune.tools.interpreter import project_environment
from rune.tools.run_limits import (
    COMMAND,
    Limits,
    launcher,
    limits_hit,
    open_cgroup,
    process_limit_report,
)
from rune.tools.runtime_dirs import runtime_dirs
from rune.tools.seccomp import filter_fd
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
    probe = [bwrap, *_isolation_flags(), *base_mounts(), "--", "true"]
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
    if problem:
        return False, problem
    sockets = (
        "only IP and netlink routing sockets, no new namespaces (seccomp)"
        if seccomp_works(bwrap)
        else "no seccomp filter here: UNIX sockets are not blocked"
    )
    return True, f"{bwrap} works; {sockets}; {process_limit_report()}"


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


@functools.cache
def seccomp_works(bwrap: str) -> bool:
    """Whether ``bwrap`` installs Rune's seccomp filter here (it needs a filter for this
    machine's architecture, and a kernel with seccomp)."""
    fd = filter_fd()
    if fd is None:
        return False
    probe = [bwrap, *_isolation_flags(), *base_mounts(), "--seccomp", str(fd), "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False, pass_fds=(fd,))
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        os.close(fd)
    return done.returncode == 0


def _isolation_flags(network: bool = False) -> list[str]:
    flags = [
        *(() if network else ("--unshare-net",)),
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        # A new session: the command cannot push keystrokes into Rune's terminal (TIOCSTI).
        "--new-session",
    ]
    if os.geteuid() == 0:
        flags += ["--cap-drop", "ALL"]
    return flags


def bwrap_argv(
    bwrap: str,
    plan: Plan,
    workspace: Path,
    seccomp_fd: int | str | None,
    *,
    network: bool = False,
) -> list[str]:
    """The bwrap prefix for a command: isolation, base mounts, the plan's mounts, the
    seccomp filter. ``network`` keeps the host's network (MCP servers the user's config lets
    reach it); ``seccomp_fd`` may be a placeholder a launcher replaces (``rune.tools.mcp``)."""
    argv = [bwrap, *_isolation_flags(network), *base_mounts(), *plan.mounts]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return [*argv, "--chdir", str(workspace), "--"]


# --- running ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    exit_code: int | None
    timed_out: bool
    head: bytes
    tail: bytes
    total: int
    #: the user stopped the turn (``rune.stop``) while it ran: it was killed
    stopped: bool = False
    #: the resource limits a contained run hit (rune.tools.run_limits), as phrases
    limits_hit: tuple[str, ...] = ()


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
    timed_out = stopped = False
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
                if stop_requested():
                    stopped = proc.poll() is None
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
    code = None if timed_out or stopped else proc.returncode
    return Outcome(
        code, timed_out, bytes(output.head), bytes(output.tail), output.total, stopped=stopped
    )


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
    elif outcome.stopped:
        status = "[stopped by the user; it and everything it started were killed]"
    else:
        status = f"[exit code {outcome.exit_code}]"
    if outcome.limits_hit:
        status += f"\n[it hit the sandbox's limit on {', '.join(outcome.limits_hit)}]"
    return "\n".join(p for p in (text or NO_OUTPUT, hidden_note(hidden), status) if p)


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
    # How it runs, in one short line (it always runs in the workspace); the whole layout is
    # in docs/sandbox.md.
    if bwrap is not None:
        plan = plan_mounts(ctx.policy, ctx.workspace, needs=command_needs(ctx))
        how = summary(seccomp_works(bwrap), plan.complete) + _granted(ctx)
    else:
        how = "NOT contained (no working bubblewrap): it runs with your full user rights"
    lines.append(f"{how}; timeout {timeout} s")
    return "\n".join(lines)


def _granted(ctx: ToolContext) -> str:
    """What the user's own settings let a contained command read besides the defaults
    (``sandbox.contained_reads``, allowed credentials): theirs to see in every approval."""
    granted = [*ctx.policy.contained_reads, *ctx.policy.allow_credentials]
    if not granted:
        return ""
    shown = ", ".join(for_display(str(path), keep="") for path in granted[:3])
    more = f" and {len(granted) - 3} more" if len(granted) > 3 else ""
    return f"; also reads (read-only, your settings) {shown}{more}"


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


def run_approved(ctx: ToolContext, change: PreparedChange) -> tuple[Outcome, list[str]]:
    """Run an approved command exactly as prepared (contained when it said so).

    Returns its outcome and the warnings about what it did that containment cannot stop
    (protected paths it created).
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
    if bwrap is None:
        env = project_environment(os.environ, ctx.workspace)
        outcome = run_captured(argv, ctx.workspace, timeout, env=env, supervise=True)
        return outcome, []
    plan = plan_mounts(ctx.policy, ctx.workspace, needs=command_needs(ctx))
    outcome = run_contained(bwrap, plan, ctx.workspace, argv, timeout, limits=COMMAND, netlink=True)
    return outcome, after_run(plan, ctx.policy, ctx.workspace)


def command_needs(ctx: ToolContext) -> list[Path]:
    """What an approved command's Python needs bound (:mod:`rune.tools.runtime_dirs`): the
    project's ``.venv``, the active ``VIRTUAL_ENV`` and the interpreter Rune runs on (with its
    environment: ``sys.executable`` works), each with its base installation."""
    home = ctx.policy.home or Path.home()
    pythons = [ctx.workspace / ".venv" / "bin" / "python", Path(sys.executable)]
    active = os.environ.get("VIRTUAL_ENV")
    if active:
        pythons.append(Path(active) / "bin" / "python")
    return [d for python in pythons if python.exists() for d in runtime_dirs(python, home)]


def run_contained(
    bwrap: str,
    plan: Plan,
    workspace: Path,
    argv: list[str],
    timeout: float,
    *,
    limits: Limits,
    env: Mapping[str, str] | None = None,
    netlink: bool = False,
) -> Outcome:
    """``argv`` inside bubblewrap with ``plan``'s mounts, the seccomp filter where it works
    (netlink's routing protocol let in when ``netlink``), ``limits``, and the allow-listed
    environment with the private home (or ``env``), with the project's interpreter on its
    ``PATH`` and not Rune's (:mod:`rune.tools.interpreter`)."""
    env = project_environment(
        contained_environment(os.environ, plan.home) if env is None else env, workspace
    )
    seccomp_fd = filter_fd(netlink=netlink) if seccomp_works(bwrap) else None
    cgroup = open_cgroup(limits)
    try:
        sandboxed = [*bwrap_argv(bwrap, plan, workspace, seccomp_fd), *argv]
        outcome = run_captured(
            launcher(limits, cgroup, sandboxed),
            workspace,
            timeout,
            env=env,
            pass_fds=() if seccomp_fd is None else (seccomp_fd,),
        )
        text = (outcome.head + outcome.tail).decode("utf-8", "replace")
        hit = limits_hit(limits, text, outcome.exit_code, cgroup)
        return dataclasses.replace(outcome, limits_hit=tuple(hit))
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
        if cgroup is not None:
            cgroup.remove()


def apply_command(ctx: ToolContext, change: PreparedChange) -> str:
    outcome, warnings = run_approved(ctx, change)
    report = format_outcome(outcome, int(change.fingerprint["timeout"]))
    report = "\n".join([report, *(for_display(w, keep="") for w in warnings)])
    if outcome.stopped:
        raise ToolError(report)  # the user stopped the turn: the call failed, say how far it got
    if outcome.timed_out or outcome.exit_code != 0:
        # A failed command is a failed call: shown with ✗, and the run is not done on it.
        raise CommandFailed(report, outcome.exit_code)
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
        command=True,
    ),
    prepare=prepare_command,
    apply=apply_command,
)
