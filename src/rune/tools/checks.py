"""``run_python``: a check the model may run without asking, because it cannot change anything.

A small model that fixes a bug usually gets it right only when it sees its fix fail first. So
it may run Python code against the workspace, as ``python -c CODE`` in the workspace, inside
the same bubblewrap sandbox as commands but with nothing writable: the whole file system is
read-only (a private, size-capped ``/tmp`` aside), there is no network, no host socket, no
secret and no credential in the environment. What such a run can do is read what the model
could read anyway, and print; so it is a read-only tool and runs at once, like ``read_file``.
Where bubblewrap does not work it is refused (``run_command``, which asks, is the way then),
and the composition root does not offer it at all.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path

from rune.errors import ToolError, ToolInputError
from rune.tools.base import Args, BuiltinTool, ToolContext, object_schema, string_arg
from rune.tools.commands import (
    bwrap_argv,
    bwrap_works,
    containment,
    find_bwrap,
    format_outcome,
    run_captured,
    seccomp_works,
)
from rune.tools.containment import plan_mounts, scrubbed_environment
from rune.tools.seccomp import filter_fd
from rune.tools.spec import ToolSpec

#: seconds a check may run (a check is a few calls, not a test suite)
CHECK_TIMEOUT = 20
#: the longest code accepted (a check is a few lines)
MAX_CODE_CHARS = 4000


def can_run_contained(ctx: ToolContext) -> bool:
    """Whether a check can run here: commands may be contained and bubblewrap works."""
    if ctx.contain_commands is False:
        return False
    bwrap = find_bwrap()
    return bwrap is not None and bwrap_works(bwrap)


def python_for(workspace: Path) -> str:
    """The project's own interpreter when it has a ``.venv``, else the ``python3`` on PATH."""
    local = workspace / ".venv" / "bin" / "python"
    if local.is_file():
        return str(local)
    return shutil.which("python3") or shutil.which("python") or sys.executable


def run_python(ctx: ToolContext, args: Args) -> str:
    code = str(args["code"])
    if not code.strip():
        raise ToolInputError("code is empty.")
    if "\0" in code:
        raise ToolInputError("code contains a NUL byte.")
    if len(code) > MAX_CODE_CHARS:
        raise ToolInputError(
            f"code is longer than {MAX_CODE_CHARS} characters; keep a check short."
        )
    bwrap = containment(ctx)
    if bwrap is None:
        raise ToolError(
            "run_python needs a sandbox (bubblewrap) and commands here run uncontained; "
            "use run_command, which asks the user."
        )
    read_only = dataclasses.replace(ctx.policy, write_roots=())
    plan = plan_mounts(read_only, ctx.workspace)
    env = scrubbed_environment(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    argv = [python_for(ctx.workspace), "-c", code]
    seccomp_fd = filter_fd() if seccomp_works(bwrap) else None
    try:
        outcome = run_captured(
            [*bwrap_argv(bwrap, plan, ctx.workspace, seccomp_fd), *argv],
            ctx.workspace,
            CHECK_TIMEOUT,
            env=env,
            pass_fds=() if seccomp_fd is None else (seccomp_fd,),
        )
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    return format_outcome(outcome, CHECK_TIMEOUT)


RUN_PYTHON = BuiltinTool(
    ToolSpec(
        "run_python",
        "Run Python code (as python -c CODE) in the workspace to check a change; it can read "
        "the project but not change it, so it runs without asking. Print what you want to "
        "see, such as a call's result. No network.",
        object_schema({"code": string_arg("Python code; print what you want to see.")}, ["code"]),
        checks=True,
    ),
    run=run_python,
)
