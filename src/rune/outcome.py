"""Whether a final answer finished the task: one rule, over the tool events of the turn (all
its budgets, before and after an interruption: ``LoopState.earlier``), for the runtime (which
tells library callers through ``OperatorResponse.incomplete``), the CLI and the TUI.

An answer finishes the task when the last change the model asked for was applied and no
command or check run after that change failed. A small model says "Fixed; the tests pass."
right after its fix was rejected and the test command exited 1; the events say otherwise, and
they are what counts:

- a file change (a mutating tool that is not a command) that was applied clears what went
  before it: earlier failures were about code that is no longer there;
- a change that failed or was rejected stays unfinished until a later change is applied;
- a command that exits non-zero (or times out, or cannot start) stays a failure until the same
  command passes, or a later change is applied; another command passing does not count (a
  ``true`` after a failed ``pytest`` proves nothing);
- a check (``run_python``) that fails stays a failure until a check passes; Rune's own run of
  the project's tests that fails, until the tests pass (a check of the model's passing shows
  nothing of them);
- a command the user rejected did not run: it neither fails nor passes anything.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from rune.messages import ToolEvent, canonical_json

#: a command that runs a project's tests (its failure is named so): pytest, unittest, tox,
#: nox, ``npm test``, ``go test``, ``tests/``, ``test_calc.py``
_TEST_COMMAND = re.compile(r"(?<![\w-])(py\.?test|unittest|tox|nox|tests?)(?![a-zA-Z-])")
#: the source of the tool events of Rune's own runs of the project's tests
#: (rune.runtime.breaker.LOOP_SOURCE, which this module may not import)
_RUNE = "rune"
#: a failure that leaves the task unfinished: a command, a check of the model's, the tests
_Failed = Literal["command", "check", "tests"]
#: how the reason of an answer cut off at the output token limit reads
CUT_OFF = "the answer was cut off at the output token limit (max_output_tokens)"


ProblemKind = Literal["change", "command", "check"]
#: how the model's reminder names each kind of failure (the error follows)
_REMINDER: dict[ProblemKind, str] = {
    "change": "Your last change was not made",
    "command": "Your last command failed",
    "check": "Your last check failed",
}


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing that leaves the task unfinished. ``reason`` is for the person, in a few
    words; ``detail`` is the error itself, for the model's reminder; ``kind``: a change, a
    command or a check; ``rejected``: the user's own word, which the model has read already;
    ``known``: shown to the model before it did anything (Rune's first run of the tests)."""

    reason: str
    detail: str
    kind: ProblemKind
    rejected: bool = False
    known: bool = False

    @property
    def reminds(self) -> bool:
        """Whether an answer right after it is sent back to the model once (not for what the
        model was told before it did anything, nor for the user's own rejection)."""
        return not (self.rejected or self.known)

    def reminder(self) -> str:
        """What the model is told once when it answers right after this failure."""
        return (
            f"{_REMINDER[self.kind]}: {self.detail} The task is not finished. Send a "
            "corrected change, or answer saying why it cannot be done."
        )


@dataclass(frozen=True, slots=True)
class ToolKinds:
    """Which tools change files, which run commands, which check the code (by name)."""

    changes: Collection[str]
    commands: Collection[str]
    checks: Collection[str]


def problems(events: Sequence[ToolEvent], kinds: ToolKinds) -> list[Problem]:
    """What leaves the run's task unfinished, oldest first (empty: nothing does)."""
    change: Problem | None = None
    # failed commands and checks by call signature, in the order they failed: (what, why)
    failed: dict[str, tuple[_Failed, Problem]] = {}
    for event in events:
        did_fail = event.status in ("failed", "denied")
        if event.name in kinds.commands:
            signature = event.name + canonical_json(event.arguments)
            if event.status == "done" or did_fail:
                failed.pop(signature, None)  # passed, or re-inserted last: the newest failure
            if did_fail:
                problem = Problem(_command_reason(event), event.error or "", "command")
                failed[signature] = ("command", problem)
        elif event.name in kinds.checks:
            signature = event.name + canonical_json(event.arguments)
            tests = event.source == _RUNE
            if event.status == "done":
                # a check of the model's passing shows nothing of the project's tests
                cleared = ("check", "tests") if tests else ("check",)
                failed = {s: f for s, f in failed.items() if f[0] not in cleared and s != signature}
            elif did_fail:
                failed.pop(signature, None)
                failed[signature] = ("tests" if tests else "check", _check_problem(event))
        elif event.name in kinds.changes:
            if event.status == "done":
                change = None
                failed.clear()
            elif event.status == "rejected":
                why = (event.error or "").partition(": ")[2] or "no reason given"
                reason = f"the last change was rejected ({why})"
                change = Problem(reason, event.error or "", "change", rejected=True)
            elif did_fail:
                change = Problem("the last change failed", event.error or "", "change")
    return [*([change] if change is not None else []), *(p for _, p in failed.values())]


def _check_problem(event: ToolEvent) -> Problem:
    if event.source != _RUNE:
        return Problem("the model's own check of its change failed", event.error or "", "check")
    # Rune's own run of the project's tests (docs/loop.md): the one before the first model call
    # is where the model started from, not something it did, so it is not sent back to it.
    return Problem(
        "the project's tests fail", event.error or "", "check", known=event.iteration == 0
    )


def incomplete_reason(found: Sequence[Problem]) -> str | None:
    """Why an answer leaves the task unfinished, in a few words (None: it does not)."""
    return "; ".join(dict.fromkeys(p.reason for p in found)) or None


def changed(events: Sequence[ToolEvent], kinds: ToolKinds) -> bool:
    """Whether the run applied a change: a file change, or a command that ran (a command may
    write files; Rune cannot tell)."""
    return any(
        e.status == "done" and (e.name in kinds.changes or e.name in kinds.commands) for e in events
    )


def _command_reason(event: ToolEvent) -> str:
    command = str(event.arguments.get("command", ""))
    what = "the last test command" if _TEST_COMMAND.search(command) else "the last command"
    if event.exit_code is not None:
        return f"{what} exited {event.exit_code}"
    if "timed out" in (event.error or ""):
        return f"{what} timed out"
    return f"{what} could not run"
