"""Tests drive the loop: the project's tests a request names, run by the loop itself.

The composition root's ``auto_checks`` gives a request its :class:`rune.tools.spec.AutoCheck`
(the tests it names), or None. Then the loop runs them before the first model call (the model
starts from the failure) and again after each applied change, without a model turn; a run whose
tests failed at the start ends when they pass, with Rune's "Fixed: ..." answer. When the request
says the tests are right, a change to a test file is refused (``AutoCheck.refusal``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rune import events as ev
from rune.calls import tool_request
from rune.errors import RuneError, TestsNotRun
from rune.messages import OperatorResponse, ToolEvent, ToolRequest
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.runtime.breaker import LOOP_SOURCE
from rune.tools.spec import AutoCheck, AutoChecks
from rune.tools.testing import SOURCE_HEADING, TEST_HEADING, TRACEBACK_HEADING

__all__ = [
    "TestDriven",
    "failed_test_run",
    "last_test_run",
    "started_with_tests",
    "unmoved_changes",
]


NOTE_AFTER_UNMOVED = 2
STOP_AFTER_UNMOVED = 3
UNMOVED_NOTE = (
    "Your last changes left this failure exactly as it was: they do not reach what the test "
    "checks. Read the failing line and the code it runs again, and change what gives that value."
)
#: where a test digest's failure ends and the source it shows begins
_SOURCE_PARTS = (TRACEBACK_HEADING, TEST_HEADING, SOURCE_HEADING)
_TIMING = re.compile(r" in \d+(?:\.\d+)?s\b")


def unmoved_changes(events: Sequence[ToolEvent]) -> int:
    """How many of the last test runs in a row (each after a change) failed exactly as the run
    before them: the same tests, the same errors (the source shown beside them aside)."""
    runs = [e for e in events if e.source == LOOP_SOURCE]
    count = 0
    for before, after in zip(reversed(runs[:-1]), reversed(runs[1:]), strict=True):
        if after.status == "done" or _failure(after.error) != _failure(before.error):
            break
        count += 1
    return count


def _failure(report: str | None) -> str:
    lines: list[str] = []
    for line in (report or "").splitlines():
        if line in _SOURCE_PARTS:
            break
        lines.append(_TIMING.sub("", line))
    return "\n".join(lines)


def last_test_run(events: Sequence[ToolEvent]) -> int | None:
    """Where the tests' last run by the loop itself is in ``events`` (None: they never ran)."""
    return next((n for n in reversed(range(len(events))) if events[n].source == LOOP_SOURCE), None)


def failed_test_run(events: Sequence[ToolEvent]) -> ToolEvent | None:
    """The tests' last run by the loop itself, when it failed."""
    last = last_test_run(events)
    return events[last] if last is not None and events[last].status == "failed" else None


def started_with_tests(state: LoopState) -> bool:
    """Whether the loop ran the tests before the first model call of this run."""
    return any(e.source == LOOP_SOURCE and e.iteration == 0 for e in state.events)


class TestDriven(Assist):
    """Runs the tests a request names, before the model starts and after each change."""

    name = "tests"
    __test__ = False  # not a pytest class, whatever its name says

    def __init__(self, auto_checks: AutoChecks) -> None:
        self._auto_checks = auto_checks
        self._by_request: dict[str, AutoCheck | None] = {}

    def check(self, state: LoopState) -> AutoCheck | None:
        """The check the loop runs itself for the request that opened this run, if any."""
        if state.opening is None:
            return None
        request = str(state.messages[state.opening].get("content") or "")
        if request not in self._by_request:
            self._by_request[request] = self._auto_checks(request)
        return self._by_request[request]

    def start(self, loop: Loop, state: LoopState) -> None:
        auto = self.check(state)
        if auto is not None:
            self._run(loop, state, auto, after_change=False)

    def refusal(self, loop: Loop, state: LoopState, request: ToolRequest) -> str | None:
        auto = self.check(state)
        if auto is None or auto.refusal is None or not loop.executor.is_mutating(request.name):
            return None
        return auto.refusal(request.arguments)

    def after_calls(self, loop: Loop, state: LoopState) -> OperatorResponse | None:
        """When a change was applied since the tests last ran, run them again; a run whose
        tests failed at the start ends when they pass."""
        auto = self.check(state)
        if auto is None or not started_with_tests(state):
            return None
        last = last_test_run(state.events)
        changed = [
            e
            for e in state.events[0 if last is None else last + 1 :]
            if e.status == "done" and loop.executor.is_mutating(e.name)
        ]
        if not changed:
            return None
        passed = self._run(loop, state, auto, after_change=True)
        if not passed:
            return self._unmoved(loop, state, auto)
        first = next((e for e in state.events if e.source == LOOP_SOURCE), None)
        if first is None or first.status == "done":
            return None
        return loop.finished(state, self._fixed_summary(loop, state, auto))

    def _unmoved(self, loop: Loop, state: LoopState, auto: AutoCheck) -> OperatorResponse | None:
        """Changes that leave the tests failing exactly as before: the model is told after
        :data:`NOTE_AFTER_UNMOVED` of them in a row, and the run stops after
        :data:`STOP_AFTER_UNMOVED` (the 1.5B added 14, then 15, 16, 17 to a tuple that was
        not the bug, a turn each, until its budgets ran out)."""
        count = unmoved_changes(state.events)
        if count >= STOP_AFTER_UNMOVED:
            return loop.finished(
                state,
                f"Stopped: the last {count} changes left {auto.what} failing exactly as before.",
            )
        if count >= NOTE_AFTER_UNMOVED:
            last = state.messages[-1]
            state.messages[-1] = {**last, "content": f"{last['content']}\n{UNMOVED_NOTE}"}
        return None

    def _run(self, loop: Loop, state: LoopState, auto: AutoCheck, *, after_change: bool) -> bool:
        """Run the tests as a call of the loop's own: its event is sent and recorded, and the
        model reads its result. Whether they passed. Before the first model call, a run that
        could not run the tests at all (none found, no runner for them) is only said to the
        user, and the loop goes on without them (:func:`started_with_tests`)."""
        request = tool_request(auto.tool, auto.arguments, None, LOOP_SOURCE)
        try:
            output, error = loop.executor.run(request.name, request.arguments), None
        except TestsNotRun as err:
            if not after_change:
                loop.note(state, f"Rune could not run {auto.what} itself: {err}")
                return False
            output, error = None, str(err)
        except Exception as err:
            output, error = None, str(err) if isinstance(err, RuneError) else repr(err)
        passed = error is None
        # (sent once the result is known: a start that ran no test shows no tool line)
        loop.emit(ev.ToolStarted(request, state.iterations_used))
        event = loop.tool_event(
            state, request, "done" if passed else "failed", output=output, error=error
        )
        state.events.append(event)
        loop.emit(ev.ToolFinished(event))
        when = "after your change" if after_change else "before you start"
        state.messages.append(
            {"role": "user", "content": f"Rune ran {auto.what} {when}:\n{output or error}"}
        )
        return passed

    def _fixed_summary(self, loop: Loop, state: LoopState, auto: AutoCheck) -> str:
        """The answer Rune writes when the tests that failed pass after the model's change."""
        files: list[str] = []
        for event in state.events:
            path = event.arguments.get("path") if event.status == "done" else None
            mutating = loop.executor.is_mutating(event.name)
            if mutating and isinstance(path, str) and path not in files:
                files.append(path)
        last = state.events[-1]
        changed = f" after the change to {', '.join(files)}" if files else ""
        return f"Fixed: {auto.what} failed before and pass now{changed} ({last.output})."
