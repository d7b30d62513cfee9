"""Check before answer: under a protocol that can withhold the answer, a change must be checked.

Small models call a wrong fix done, even right after seeing it fail (task suite,
``bench/README.md``). So with a check tool offered (``ToolSpec.checks``, ``run_python``):

- a change the model tried (made or failed) must be checked before it may answer: its result
  says so, and the next turn's schema leaves the answer out;
- a check that failed must be acted on (a new change, or another check), except after
  :data:`MAX_FAILED_CHECKS` failed checks in the run: its own expectation may be wrong.

A change the user rejected needs no check; without a check tool there is no rule; when the loop
runs the request's tests itself (:mod:`rune.assists.tests`), no reminder is added.

A check proves a change only when it fails on the code as it was. A small model's own check
often asserts something the bug never touched: on the algorithm suite the 1.5B's checks passed
on four wrong fixes, and each run ended done. So when the run ends on an answer and every check
of the model's that passed since its last change passes on the code as it was before the run
changed it, too (tried with :class:`rune.tools.spec.Trials`, nothing written), the answer
leaves the task unfinished (:data:`SHOWS_NOTHING`): nothing showed that the change works. The
model is not told (its fix may be right); the person reading the outcome is.

Nor does a check prove a change when the model changed what it expects to fit the code: after
its check ``assert circle_area(3) == 28.274`` failed, the 1.5B changed the code to ``r * 2`` and
the check to ``assert circle_area(3) == 6``, which passed, and answered. So when a check that
passed since the last change expects of an expression only values that no check expected of it
before one failed on that assert (:func:`moved_expectation`), the answer leaves the task
unfinished with the expression and both values.

Under the ``rune`` command (``ends_on_proof``), a check that shows the change ends the run: the
model's check passed right after its change, fails on the code as it was, moved no expectation,
and nothing else leaves the task unfinished (:mod:`rune.outcome`, the other assists). Rune
writes the answer, as it does when the project's tests pass (:mod:`rune.assists.tests`): the
1.5B's answer turn after such a check only repeated what the events say, or claimed more, and
cost a model call (``bench/README.md``: 14 of the 16 `bugs` runs made one call less). A library
caller's loop keeps the design's rule that the model's answer ends the run.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Sequence

from rune import outcome
from rune.assists.tests import TestDriven
from rune.calls import tool_request
from rune.messages import OperatorResponse, ToolEvent, ToolRequest, ToolStatus
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.runtime.breaker import LOOP_SOURCE
from rune.text import for_display, visible
from rune.tools.spec import Trials, trials_of

__all__ = [
    "MAX_FAILED_CHECKS",
    "MAX_TRIED_CHECKS",
    "SHOWS_NOTHING",
    "CheckBeforeAnswer",
    "moved_expectation",
]

#: failed checks in one run after which the model may answer anyway
MAX_FAILED_CHECKS = 2
#: the most checks run again on the unchanged code when a run ends (each up to its timeout)
MAX_TRIED_CHECKS = 3
#: why an answer is unfinished when the model's checks pass on the unchanged code too
SHOWS_NOTHING = (
    "the model's check passes on the code as it was before the change, too: "
    "nothing showed that the change works"
)


class CheckBeforeAnswer(Assist):
    """Asks for a check after each change, and withholds the answer until one passed."""

    name = "check"

    def __init__(
        self,
        tests: TestDriven | None = None,
        trials: Trials | None = None,
        *,
        ends_on_proof: bool = False,
    ) -> None:
        self._tests = tests
        #: None: the loop's executor, when it is one
        self._trials = trials
        self._ends_on_proof = ends_on_proof

    def after_calls(self, loop: Loop, state: LoopState) -> OperatorResponse | None:
        """The run's end, with Rune's answer, when the model's check just showed its change."""
        if not self._ends_on_proof or not self._shows_last_change(loop, state):
            return None
        if outcome.problems(state.events, loop.kinds):
            return None
        if loop.unfinished_reasons(state, besides=self):
            return None
        change = state.events[-2]
        path = change.arguments.get("path")
        what = for_display(path) if isinstance(path, str) else change.name
        return loop.finished(
            state,
            f"Changed {what}: the check run after the change passes, and it fails on the "
            "code as it was.",
        )

    def _shows_last_change(self, loop: Loop, state: LoopState) -> bool:
        """Whether the turn's call was the model's check, right after its change, passing now
        and failing on the code as it was, with no expectation of it moved to fit the code."""
        checks = loop.kinds.checks
        if not checks or not loop.protocol_of(state).withholds_answer or len(state.events) < 2:
            return False
        if self._tests is not None and self._tests.check(state) is not None:
            return False  # the project's tests judge the run
        change, check = state.events[-2], state.events[-1]
        if check.name not in checks or check.status != "done" or check.source == LOOP_SOURCE:
            return False
        if change.name not in loop.kinds.changes or change.status != "done":
            return False
        if moved_expectation(state.events, [check], checks) is not None:
            return False
        trials = trials_of(self._trials, loop.executor)
        before = None if trials is None else trials.try_before_changes(check.name, check.arguments)
        return before is not None and not before.passed

    def after_result(
        self, loop: Loop, state: LoopState, request: ToolRequest, status: ToolStatus
    ) -> str:
        checks = loop.kinds.checks
        if status == "rejected" or not checks or not loop.protocol_of(state).withholds_answer:
            return ""
        if not loop.executor.is_mutating(request.name):
            return ""
        if self._tests is not None and self._tests.check(state) is not None:
            return ""  # the loop runs the tests itself
        return f"\nBefore you answer, run {min(checks)} to check the code as it is now."

    def before_answer(self, loop: Loop, state: LoopState) -> str | None:
        """An answer the protocol could not withhold (code blocks) goes back when it came too
        early; under a grammar it never comes."""
        if loop.protocol_of(state).answer_schema or self.answer_allowed(loop, state):
            return None
        return f"Before you answer, run {min(loop.kinds.checks)} to check the code as it is now."

    def answer_allowed(self, loop: Loop, state: LoopState) -> bool:
        checks = loop.kinds.checks
        if not checks or not loop.protocol_of(state).withholds_answer:
            return True
        for event in reversed(state.events):
            if event.source == LOOP_SOURCE and event.iteration == 0:
                continue  # the tests as the run found them: nothing the model did
            if event.name in checks:
                if event.status == "done":
                    return True
                failed = sum(1 for e in state.events if e.name in checks and e.status != "done")
                return failed >= MAX_FAILED_CHECKS
            if loop.executor.is_mutating(event.name):
                return event.status == "rejected"
        return True

    def unfinished(self, loop: Loop, state: LoopState) -> str | None:
        trials = trials_of(self._trials, loop.executor)
        passed = _checks_since_last_change(state.events, loop.kinds.changes, loop.kinds.checks)
        if not passed or any(e.source == LOOP_SOURCE for e in passed):
            return None  # no check passed, or the project's tests pass
        moved = moved_expectation(state.events, passed, loop.kinds.checks)
        if moved is not None:
            return _moved_reason(*moved)
        if trials is None:
            return None  # nothing to try the checks with
        distinct = list(
            {tool_request(e.name, e.arguments).signature: e for e in reversed(passed)}.values()
        )
        if len(distinct) > MAX_TRIED_CHECKS:
            return None  # more than is worth running again at the end: no verdict
        for event in distinct:
            before = trials.try_before_changes(event.name, event.arguments)
            if before is None or not before.passed:
                return None  # this check shows the change (or cannot be tried: no verdict)
        return SHOWS_NOTHING


def _checks_since_last_change(
    events: Sequence[ToolEvent], changes: Collection[str], checks: Collection[str]
) -> list[ToolEvent]:
    """The checks that passed after the run's last change it applied (none without one)."""
    passed: list[ToolEvent] = []
    for event in reversed(events):
        if event.name in changes and event.status == "done":
            return passed
        if event.name in checks and event.status == "done":
            passed.append(event)
    return []


def moved_expectation(
    events: Sequence[ToolEvent], passed: Sequence[ToolEvent], checks: Collection[str]
) -> tuple[str, str, str] | None:
    """``(expression, a value expected before, the value expected now)`` when a check in
    ``passed`` asserts ``expression == value`` and every value it expects of that expression
    differs from all that the model's checks in ``events`` expected of it before an assertion
    of theirs failed; else None."""
    failed: dict[str, set[str]] = {}
    for event in events:
        own = event.name in checks and event.source != LOOP_SOURCE
        if own and event.status != "done" and "AssertionError" in (event.error or ""):
            for expression, value in _expectations(event.arguments.get("code")):
                failed.setdefault(expression, set()).add(value)
    now: dict[str, set[str]] = {}
    for event in passed:
        for expression, value in _expectations(event.arguments.get("code")):
            now.setdefault(expression, set()).add(value)
    for expression, values in now.items():
        before = failed.get(expression, set())
        if before and not values & before:
            return expression, min(before), min(values)
    return None


def _moved_reason(expression: str, expected: str, now: str) -> str:
    """Why a run whose check was changed to fit the code is unfinished."""
    return (
        f"the model changed what its check expects of {_shown(expression)} ({_shown(expected)} "
        f"before it failed, {_shown(now)} now) to fit the code: nothing showed that the change "
        "works"
    )


def _shown(code: str, limit: int = 80) -> str:
    """A piece of the model's check as one short line a terminal shows as it is."""
    line = " ".join(code.split())
    return visible(line if len(line) <= limit else line[: limit - 1] + "…", keep="")


def _expectations(code: object) -> list[tuple[str, str]]:
    """``(expression, value)`` of each ``assert expression == value`` in the check's code."""
    if not isinstance(code, str):
        return []
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = []
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.Assert) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            found.append((ast.unparse(test.left), ast.unparse(test.comparators[0])))
    return found
