"""``python -m rune.app.canary``: machine-check the loop's and the sandbox's claims with no model.

The claims are the ones docs/loop.md and docs/sandbox.md make: the breaker and its exact
message, the budget fields, the 1..8 iteration range, approval from serialized state, the
denial text, the tools block's guidance, one write choke point. Every check lives here. Each
returns None when its claim holds, or a sentence saying what broke; the process exits 0 only
when every claim holds. Everything runs against ScriptedTransport and real files in a
throwaway directory; nothing touches the network.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from rune.errors import ConfigError, SandboxDenied
from rune.runtime import local_tool_runtime as loop_module
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import SandboxPolicy, ToolExecutor, validate_write_path
from rune.tools.write_sites import unreviewed_write_sites
from rune.transport.scripted import ScriptedTransport

BREAKER_TEXT = (
    "tool {name} failed {count} consecutive times with identical arguments — "
    "stopping before the iteration budget burns"
)
DENIAL_TEXT = (
    "Access denied: {target} is outside allowed write directories: {roots}. "
    "Write inside one of those directories instead."
)
# The canary seals with a key of its own: it never creates one in the user's data directory.
CANARY_KEY = secrets.token_bytes(32)
GUIDANCE_LINES = (
    "Use tools for every file/command action; never fabricate tool output.",
    "Read before editing; verify fixes by running them.",
)


def _call(name: str, **arguments: object) -> dict[str, object]:
    return {"content": "", "tool_calls": [{"function": {"name": name, "arguments": arguments}}]}


def _runtime(
    workspace: Path,
    turns: list[dict[str, object]],
    max_iterations: int = 8,
    key: bytes = CANARY_KEY,
) -> LocalToolRuntime:
    executor = ToolExecutor(SandboxPolicy.workspace_only(workspace), workspace)
    return LocalToolRuntime(
        ScriptedTransport(turns),
        executor,
        model="canary",
        max_iterations=max_iterations,
        seal_key=key,
    )


def check_breaker_trips(workspace: Path) -> str | None:
    turns = [_call("read_file", path="missing.txt") for _ in range(8)]
    resp = _runtime(workspace, turns).run([{"role": "user", "content": "loop"}])
    expected = BREAKER_TEXT.format(name="read_file", count=2)
    if resp.success or resp.error != expected:
        return f"a scripted always-failing loop ended with {resp.error!r}, not {expected!r}"
    if resp.iterations_used != 2:
        return f"the breaker let {resp.iterations_used} iterations burn, not 2"
    return None


def check_breaker_message_pinned(workspace: Path) -> str | None:
    for name, count in (("edit_file", 2), ("run_command", 5)):
        if loop_module.breaker_message(name, count) != BREAKER_TEXT.format(name=name, count=count):
            return "breaker_message() no longer produces the pinned text"
    if loop_module.BREAKER_THRESHOLD != 2:
        return f"the breaker threshold is {loop_module.BREAKER_THRESHOLD}, not 2"
    return None


def check_budget_fields(workspace: Path) -> str | None:
    cases: dict[str, list[dict[str, object]]] = {
        "success": [{"content": "done"}],
        "pause": [_call("write_file", path="a.txt", content="a")],
        "failure": [_call("read_file", path="missing.txt")] * 2,
    }
    for label, turns in cases.items():
        resp = _runtime(workspace, turns, max_iterations=5).run([{"role": "user", "content": "x"}])
        if resp.iteration_budget != 5 or resp.iterations_used < 1:
            return f"{label}: iterations_used/iteration_budget = {resp.budget_label}"
    return None


def check_max_iterations_range(workspace: Path) -> str | None:
    for bad in (0, 9):
        try:
            _runtime(workspace, [], max_iterations=bad)
        except ConfigError:
            continue
        return f"max_iterations={bad} was accepted"
    for good in (1, 8):
        _runtime(workspace, [], max_iterations=good)
    return None


def check_approve_from_serialized_state(workspace: Path) -> str | None:
    target = workspace / "calc.py"
    target.write_text("def add(a, b):\n    return a - b\n")
    fixed = "def add(a, b):\n    return a + b\n"
    paused = _runtime(workspace, [_call("write_file", path="calc.py", content=fixed)]).run(
        [{"role": "user", "content": "fix"}]
    )
    if paused.pending_state is None:
        return "a mutating call did not pause for approval"
    if target.read_text() != "def add(a, b):\n    return a - b\n":
        return "the file changed before approval"
    state = json.loads(json.dumps(paused.pending_state))
    resumed = _runtime(workspace, [{"content": "fixed"}]).approve(state)
    if not resumed.success or target.read_text() != fixed:
        return f"approve on a fresh runtime did not finish the job: {resumed.error}"
    other_key = _runtime(workspace, [{"content": "no"}], key=secrets.token_bytes(32))
    if other_key.approve(state).error_kind != "ApprovalMismatch":
        return "a pending state sealed by another key was not refused"
    state["queue"][0]["arguments"]["content"] = "import os\n"
    tampered = _runtime(workspace, [{"content": "no"}]).approve(state)
    if tampered.error_kind != "ApprovalMismatch":
        return "an altered pending state was not refused"
    return None


def check_denial_text(workspace: Path) -> str | None:
    # A policy shaped like the default one (a home and a second drive to write, /tmp to read),
    # with roots of its own: the text must name whatever the roots are.
    base = Path(os.path.realpath(workspace))
    home, drive = base / "home", base / "workdrive"
    policy = SandboxPolicy(
        read_roots=[home, drive, Path(tempfile.gettempdir())],
        write_roots=[home, drive],
        blocked=[Path("/etc"), Path("/var")],
    )
    target = "/etc/nope.txt"
    expected = DENIAL_TEXT.format(target=target, roots=[str(home), str(drive)])
    try:
        validate_write_path(target, policy)
    except SandboxDenied as err:
        return None if str(err) == expected else f"denial text is {str(err)!r}, not {expected!r}"
    return f"{target} was allowed"


def check_tools_guidance(workspace: Path) -> str | None:
    try:
        from rune.operator import RuneOperator
    except ImportError:
        return "rune.operator.RuneOperator is missing"
    executor = ToolExecutor(SandboxPolicy.workspace_only(workspace), workspace)
    operator = RuneOperator(ScriptedTransport([]), executor, model="canary")
    block = operator._contributor_tools()
    text = getattr(block, "text", str(block))
    if getattr(block, "bucket", 90) != 90 or getattr(block, "evictable", False):
        return "the tools block is not bucket 90 / non-evictable"
    if not text.rstrip().endswith("\n".join(GUIDANCE_LINES)):
        return "the tools block does not end with the two guidance lines"
    return None


def check_choke_point(_workspace: Path) -> str | None:
    try:
        sites = unreviewed_write_sites()
    except (OSError, SyntaxError) as err:
        return f"cannot scan the rune package: {err}"
    if sites:
        listed = "; ".join(str(s) for s in sites[:10])
        return f"{len(sites)} write site(s) outside fs.atomic_write: {listed}"
    return None


CHECKS: dict[str, Callable[[Path], str | None]] = {
    "circuit breaker trips on a scripted loop": check_breaker_trips,
    "circuit breaker message pinned": check_breaker_message_pinned,
    "budget fields on success, pause and failure": check_budget_fields,
    "max_iterations range 1..8 enforced": check_max_iterations_range,
    "approve in a fresh runtime from serialized state": check_approve_from_serialized_state,
    "sandbox denial text names the allowed directories": check_denial_text,
    "tools block ends with the guidance lines": check_tools_guidance,
    "single write choke point": check_choke_point,
}


def main() -> int:
    checks = CHECKS
    failures = 0
    with tempfile.TemporaryDirectory(prefix="rune-canary-") as tmp:
        for number, (claim, check) in enumerate(checks.items()):
            workspace = Path(tmp) / str(number)
            workspace.mkdir()
            try:
                problem = check(workspace)
            except Exception as err:
                problem = f"check crashed: {err!r}"
            failures += problem is not None
            status = "ok  " if problem is None else "FAIL"
            print(f"{status} {claim}" + (f": {problem}" if problem else ""))
    print(f"{len(checks) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
