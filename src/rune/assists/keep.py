"""Keep what passes: a change that makes more of the project's tests fail is not made.

Where Rune runs the tests itself (:mod:`rune.assists.tests`), a small model's next change
sometimes breaks what its last one fixed: on the spec suite the 1.5B's first change passed 4 of
5 tests, its next failed all 5, and the run ended on the worse code. So before a change is
prepared, when the tests' last run failed but some passed, the change is tried in the sandbox
against the same tests (:class:`rune.tools.spec.Trials`, nothing written); when more of the same
number of tests fail with it, it is refused, and the model hears the counts. A change that leaves
as many failing or fewer, or one that cannot be tried, goes on as before.
"""

from __future__ import annotations

from rune.assists.tests import failed_test_run
from rune.messages import ToolRequest
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.tools import testing
from rune.tools.spec import Trials, trials_of

__all__ = ["KeepWhatPasses", "worse_message"]


def worse_message(failing: int, ran: int, now: int) -> str:
    return (
        f"Not applied: with this change {failing} of the {ran} tests fail; {now} fail now. It "
        "breaks tests that pass: change only what the failing tests show, and keep the rest."
    )


class KeepWhatPasses(Assist):
    """Refuses a change that makes more of the tests Rune runs fail than fail now."""

    name = "keep"

    def __init__(self, trials: Trials | None = None) -> None:
        #: None: the loop's executor, when it is one
        self._trials = trials

    def refusal(self, loop: Loop, state: LoopState, request: ToolRequest) -> str | None:
        if not loop.executor.is_mutating(request.name):
            return None
        last = failed_test_run(state.events)
        now = testing.tally(last.error or "") if last is not None else None
        if last is None or now is None or now[1] >= now[0]:
            return None  # passing, no counts, or nothing passes that a change could break
        trials = trials_of(self._trials, loop.executor)
        if trials is None:
            return None
        trial = trials.try_change(request.name, request.arguments, last.name, last.arguments)
        if trial is None or trial.passed or not trial.made:
            return None
        after = testing.tally(trial.report)
        if after is None or after[0] != now[0] or after[1] <= now[1]:
            return None
        return worse_message(after[1], after[0], now[1])
