"""``run_python``: a check the model may run without asking, because it cannot change anything.

A small model that fixes a bug usually gets it right only when it sees its fix fail first. So
it may run Python code against the workspace, as ``python -c CODE`` in the workspace, inside
the same bubblewrap layout as commands (:mod:`rune.tools.containment`) but with nothing of the
host writable: it sees the system directories, the workspace (read-only) and its interpreter's
installation, and nothing else (home is private and empty); no network, no socket but IP and
netlink, an allow-listed environment, and the strongest resource limits
(:data:`rune.tools.run_limits.CHECK`). What such a run can do is read the project and print;
so it is a read-only tool and runs at once, like ``read_file``. Where bubblewrap or the
seccomp filter does not work, or the policy keeps the model to the workspace, the executor
does not offer it (``run_command``, which asks, is the way then); where the workspace is too
big to scan for credential stores, a check is refused.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import itertools
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from rune.errors import ToolError, ToolInputError
from rune.tools.base import Args, BuiltinTool, ToolContext, object_schema, string_arg
from rune.tools.commands import (
    Outcome,
    bwrap_works,
    containment,
    find_bwrap,
    format_outcome,
    run_contained,
    seccomp_works,
)
from rune.tools.containment import SCAN_DIRS, contained_environment, plan_mounts
from rune.tools.interpreter import project_python
from rune.tools.run_limits import CHECK
from rune.tools.runtime_dirs import runtime_dirs
from rune.tools.sandbox import within
from rune.tools.spec import ToolSpec, Trial

#: seconds a check may run (a check is a few calls, not a test suite)
CHECK_TIMEOUT = 20
#: the longest code accepted (a check is a few lines). It is in the tool's schema, so under the
#: constrained protocol the grammar ends the string there. It was 500 when it was also the
#: stop for a greedy small model repeating the same assert until the 1,024-token cap; a check
#: of several asserts was then cut mid-expression (a SyntaxError in its own code), so it is
#: longer now that a reply repeating itself is stopped as it streams
#: (:mod:`rune.transport.repetition`).
MAX_CODE_CHARS = 1200
_ASSERTS = re.compile(r"\bassert\b|\braise\b")


def can_run_contained(ctx: ToolContext) -> bool:
    """Whether checks are offered: commands may be contained, bubblewrap builds the layout and
    installs the seccomp filter (without it a vsock to the hypervisor would be open), and the
    policy lets the model read the user's home anyway (freely, or once the user approves). A
    check reads the system directories
    and the interpreter's installation as well as the workspace, which is more than a
    workspace-only policy (``sandbox.workspace_only``) lets the model read."""
    home = ctx.policy.home
    readable = (*ctx.policy.read_roots, *ctx.policy.ask_read_roots)
    if ctx.contain_commands is False or home is None or not within(home, readable):
        return False
    bwrap = find_bwrap()
    return bwrap is not None and bwrap_works(bwrap) and seccomp_works(bwrap)


def run_python(ctx: ToolContext, args: Args) -> str:
    code = _check_code(args, asserting=False)
    if not _ASSERTS.search(code):
        # Refused unseen, the 1.5B sent the same printing check again until the breaker
        # stopped a run whose fix was right: it sees what its code printed, and how to assert.
        outcome = format_outcome(_run_check(ctx, code), CHECK_TIMEOUT)
        raise ToolError(f"{NO_ASSERT} It printed:\n{outcome}\n{_assert_instead(code)}")
    trial = _verdict(_run_check(ctx, code), ctx.workspace)
    if not trial.passed:
        # A failing check is a failed call: the model sees it as an error, the breaker counts
        # it, and the constrained protocol keeps asking for a check that passes.
        raise ToolError(trial.report)
    return trial.report


def try_with(ctx: ToolContext, args: Args, files: Mapping[Path, bytes]) -> Trial:
    """The check ``args`` run on the workspace as it would be if each path of ``files`` (an
    existing file) held its content (the same sandbox as :func:`run_python`; nothing in the
    workspace is written: :func:`trial_binds`)."""
    code = _check_code(args)
    with trial_binds(files) as binds:
        return _verdict(_run_check(ctx, code, over=binds), ctx.workspace)


@contextlib.contextmanager
def trial_binds(files: Mapping[Path, bytes]) -> Iterator[list[tuple[Path, Path]]]:
    """``(source, target)`` binds that show each path of ``files`` holding its content: each
    source is a private copy, bound read-only over the real file, so nothing is written."""
    with tempfile.TemporaryDirectory(prefix="rune-trial-") as scratch:
        binds: list[tuple[Path, Path]] = []
        for n, (path, content) in enumerate(files.items()):
            copy = Path(scratch) / str(n)
            copy.write_bytes(content)
            binds.append((copy, path))
        yield binds


def _verdict(outcome: Outcome, workspace: Path) -> Trial:
    report = format_outcome(outcome, CHECK_TIMEOUT)
    if outcome.exit_code == 0:
        return Trial(passed=True, report=report)
    error, frame = _last_error(report)
    own_fault = frame == "<string>" and error in _CHECK_OWN_ERRORS
    meant = _meant_module(report, workspace) if frame == "<string>" else None
    if own_fault:
        report += f"\n[the {error} is in the check's own code, not in the project: fix the check]"
    elif meant is not None:
        # the 1.5B checked quick.py with `from quicksort import quicksort` again and again,
        # and the repair drew six changes against a check no change could pass
        own_fault = True
        report += (
            f"\n[the workspace has no module {meant[0]}, but it has {meant[1]}: fix the check's "
            "import]"
        )
    return Trial(
        passed=False,
        report=f"the check failed:\n{report}",
        asserted=error == "AssertionError",
        own_fault=own_fault,
    )


#: errors that, raised by the check's own code, mean the check is wrong, not the project
_CHECK_OWN_ERRORS = frozenset({"NameError", "SyntaxError", "IndentationError"})
_FRAME = re.compile(r'^\s*File "([^"]*)", line \d+')
_ERROR = re.compile(r"^(\w+(?:Error|Exception))\b")


_NO_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([A-Za-z_][\w.]{0,99})'$", re.M)
#: at most this many entries of the workspace's top directory are looked at for its modules
_MODULES_SCANNED = 500


def _meant_module(report: str, workspace: Path) -> tuple[str, str] | None:
    """``(missing, meant)`` when the check imports a module the workspace lacks and one of
    the workspace's own top-level modules is close to its name (a misspelt import), else None:
    a module the task asks the model to create has no close match and stays the project's."""
    missing = _NO_MODULE.findall(report)
    if not missing:
        return None
    top = missing[-1].split(".")[0]
    modules: list[str] = []
    try:
        with os.scandir(workspace) as entries:
            for entry in itertools.islice(entries, _MODULES_SCANNED):
                name, is_dir = entry.name, entry.is_dir(follow_symlinks=False)
                if name.endswith(".py") and entry.is_file(follow_symlinks=False):
                    modules.append(name[:-3])
                elif is_dir and os.path.isfile(os.path.join(entry.path, "__init__.py")):
                    modules.append(name)
    except OSError:
        return None
    if top in modules:
        return None
    close = difflib.get_close_matches(top, modules, n=1, cutoff=0.6)
    return (top, close[0]) if close else None


def _last_error(report: str) -> tuple[str | None, str | None]:
    """The exception a Python traceback in ``report`` ends with, and the file of its last
    frame (``<string>``: the check's own code)."""
    error = frame = None
    for line in report.splitlines():
        if match := _FRAME.match(line):
            frame = match.group(1)
        elif match := _ERROR.match(line):
            error = match.group(1)
    return error, frame


def _check_code(args: Args, *, asserting: bool = True) -> str:
    """The code of the check ``args``; a typed error for code that cannot be one, and, with
    ``asserting``, for code that asserts nothing."""
    code = str(args["code"])
    if not code.strip():
        raise ToolInputError("code is empty.")
    if "\0" in code:
        raise ToolInputError("code contains a NUL byte.")
    if len(code) > MAX_CODE_CHARS:
        raise ToolInputError(
            f"code is longer than {MAX_CODE_CHARS} characters; keep a check short."
        )
    if asserting and not _ASSERTS.search(code):
        # A check that only prints passes whatever the code does: a small model read "Fizz"
        # printed for fizzbuzz(15) and called it fixed.
        raise ToolInputError(f"{NO_ASSERT} {_assert_instead(code)}")
    return code


#: why code that asserts nothing is no check (a run of it fails, with what it printed)
NO_ASSERT = "a check must assert what the code should do; this code asserts nothing."


def _assert_instead(code: str) -> str:
    """How the printing ``code`` asserts instead: its last ``print(expression)`` as ``assert
    expression == ...``, when it has one."""
    printed: ast.expr | None = None
    try:
        for node in ast.walk(ast.parse(code)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
                and len(node.args) == 1
            ):
                printed = node.args[0]
        shown = ast.unparse(printed) if printed is not None else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        shown = None
    if shown is None or len(shown) > MAX_SHOWN_EXPRESSION or "\n" in shown:
        return "Assert what the code should do instead, e.g. assert add(2, 3) == 5."
    return (
        f"Assert what the code should do instead: assert {shown} == (the value the task or "
        "the docstring asks for)."
    )


#: the longest expression of the model's shown back in how to assert it
MAX_SHOWN_EXPRESSION = 160


def _run_check(ctx: ToolContext, code: str, *, over: Sequence[tuple[Path, Path]] = ()) -> Outcome:
    return run_read_only(ctx, ["-c", code], over=over)


def run_read_only(
    ctx: ToolContext,
    arguments: Sequence[str],
    *,
    over: Sequence[tuple[Path, Path]] = (),
    timeout: float = CHECK_TIMEOUT,
) -> Outcome:
    """The project's interpreter run with ``arguments`` in the workspace, contained with
    nothing writable; ``over`` binds files (read-only) over paths of the workspace,
    ``(source, target)``."""
    bwrap = containment(ctx)
    if bwrap is None:
        raise ToolError(
            "checks need a sandbox (bubblewrap) and commands here run uncontained; "
            "use run_command, which asks the user."
        )
    read_only = dataclasses.replace(ctx.policy, write_roots=())
    python = project_python(os.environ, ctx.workspace)
    home = ctx.policy.home or Path.home()
    needs = runtime_dirs(Path(python), home)
    plan = plan_mounts(read_only, ctx.workspace, needs=needs, without_approval=True)
    if not plan.complete:
        # Credential stores below where the scan stopped would be readable: fail closed.
        raise ToolError(
            f"checks cannot run here: the workspace has more than {SCAN_DIRS} directories "
            "(or took too long to scan), so credential stores deep in it could not all be "
            "hidden. Use run_command, which asks the user."
        )
    env = contained_environment(os.environ, plan.home)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    binds = [arg for source, target in over for arg in ("--ro-bind", str(source), str(target))]
    plan = dataclasses.replace(plan, mounts=[*plan.mounts, *binds])
    argv = [python, *arguments]
    return run_contained(bwrap, plan, ctx.workspace, argv, timeout, env=env, limits=CHECK)


RUN_PYTHON = BuiltinTool(
    ToolSpec(
        "run_python",
        "Run Python code (as python -c CODE) in the workspace to check a change; it can read "
        "the project but not change it, so it runs without asking. Assert what the code "
        "should do; a failed assertion or any error fails the check. No network.",
        object_schema(
            {
                "code": {
                    **string_arg("Python code, e.g. an import and an assert."),
                    "maxLength": MAX_CODE_CHARS,
                }
            },
            ["code"],
        ),
        checks=True,
    ),
    run=run_python,
    trial=try_with,
    offered=can_run_contained,
)
