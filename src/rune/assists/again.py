"""Ask again when a change changes nothing: a reply that re-sends what the file holds is not run.

Once its change failed the tests and no sampled repair passed them, the 1.5B re-sent the
function exactly as the file held it, greedy, turn after turn: "nothing to change", a check,
the same function again, until the breaker or the turn budget ended the run (the algorithm and
repository suites, ``bench/README.md``). The loop can see such a reply before it runs it: the
change's plan leaves the file as it is (:class:`rune.errors.NothingToChange`). So, in a run
where Rune runs the project's tests (:mod:`rune.assists.tests`), it is not run.
The model is asked again from the same conversation and the answer it would have read, sampled
(:data:`rune.assists.repair.TEMPERATURE`, a seed per sample, so a run repeats), for up to
:data:`SAMPLES` changes made with the reply's own tool (never another: a sample that picked
``run_command`` once deleted the library's module):

- when the tests' last run failed, and they fail on the code as the run found it too (the
  sampled repair's rule), the first sample that passes them takes the reply's place, else the
  one that leaves the fewest tests failing, else one that moves a stuck assert's report
  (:func:`rune.assists.repair.pick`);
- else, or when none of those is found, the first sample that changes something and that no
  assist refuses (:mod:`rune.assists.keep` refuses one that makes more tests fail): a different
  change gives the model a new result to read where the same reply would give it the same
  error.

A reply that re-sends a function (or file) the run already changed, as the file holds it now,
when the tests' last run since that change failed, is the end of the run
(:func:`judged_change`): the change runs as it is, the model reads that it
changes nothing, and Rune's answer says where the run stopped. No sample is drawn: the stuck
1.5B re-sent such a change until the breaker tripped, and in 40 runs of the spec and repository
suites no sample asked again passed the tests (``bench/README.md``, fifteenth session).

Samples that change nothing, or repeat a change the run already made or tried, are skipped,
and drawing stops once :data:`SET_ON_IT` samples in a row repeat the reply word for word (the
model is set on it: then not again in that run); when no sample is left the reply runs as it
is and the model reads why. At most :data:`MAX_AGAIN` times a run; each sample is an assist's
model call, outside the step count, as the sampled repair's are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from rune.assists import repair
from rune.assists.tests import failed_test_run, last_test_run, started_with_tests
from rune.calls import tool_request
from rune.errors import NothingToChange, RuneError
from rune.formats import constrained
from rune.formats.constrained import ConstrainedCall
from rune.messages import Message, OperatorResponse, ToolRequest
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.tools import testing
from rune.tools.spec import Executor, Trial, Trials, trials_of

__all__ = [
    "MAX_AGAIN",
    "SAMPLES",
    "SET_ON_IT",
    "ReaskWhenNoChange",
    "changes_nothing",
    "judged_change",
    "preparing_fails",
]

E = TypeVar("E", bound=RuneError)

#: times in one run
MAX_AGAIN = 2
#: replies drawn each time...
SAMPLES = 4
#: ...but no more once this many in a row repeat the reply word for word (on the algorithm
#: suite all four samples of the 1.5B did, 24 s for nothing)
SET_ON_IT = 2


def changes_nothing(executor: Executor, call: ToolRequest) -> NothingToChange | None:
    """Why ``call`` would leave its file as it is, or None (it changes something, or it cannot
    be prepared at all: that error is the call's own, the model reads it when it runs)."""
    return preparing_fails(executor, call, NothingToChange)


def judged_change(executor: Executor, state: LoopState, call: ToolRequest) -> str | None:
    """Where ``call`` changes (its path, and the function it names), when the run changed that
    place before the tests' last run and that run failed; else None. For a call that changes
    nothing, the tests have then judged the very code it would leave, and it is not the code the
    run started from (that one the model may re-send for want of seeing the bug:
    :mod:`rune.assists.rewrite` and the samples here answer it)."""
    events = state.events
    last = last_test_run(events)
    if last is None or events[last].status != "failed":
        return None
    place = _place(call.arguments)
    if not any(
        e.status == "done" and executor.is_mutating(e.name) and _place(e.arguments) == place
        for e in events[:last]
    ):
        return None
    path, name = place
    return f"{path} ({name})" if name else path


def _place(arguments: Mapping[str, Any]) -> tuple[str, str]:
    """The file a change is to, and the function it names ("" for none). Not the whole call:
    the change the run made may differ from the one re-sent by a blank the file does not keep,
    or be the plain-Python version of a reply whose code did not parse (repo toolz-partition-all
    at 20f9336)."""
    path, name = arguments.get("path"), arguments.get("name")
    return (str(path or "the file"), name if isinstance(name, str) else "")


def preparing_fails(executor: Executor, call: ToolRequest, kind: type[E]) -> E | None:
    """The error of the ``kind`` that preparing ``call`` meets, or None (it prepares, or it
    meets another error: the model reads that one when the call runs)."""
    try:
        executor.prepare(call.name, call.arguments)
    except kind as err:
        return err
    except RuneError:
        return None
    return None


class ReaskWhenNoChange(Assist):
    """Puts a sampled change in place of a reply that changes nothing."""

    name = "again"

    def __init__(self, trials: Trials | None = None) -> None:
        #: None: the loop's executor, when it is one
        self._trials = trials

    def replace_call(self, loop: Loop, state: LoopState, call: ToolRequest) -> ToolRequest:
        executor = loop.executor
        recalled = self.recalled(state)
        asked = int(recalled.get("asked", 0))
        if state.opening is None or not executor.is_mutating(call.name):
            return call
        if not started_with_tests(state):
            # only where the project's tests judge the samples: on the algorithm suite the
            # model's own check was wrong (no right answer passed it), the samples it picked
            # kept a doomed run going for 8 steps and 9 minutes, and a task fixed without
            # this assist was not
            return call
        nothing = changes_nothing(executor, call)
        if nothing is None:
            return call
        judged = judged_change(executor, state, call)
        if judged is not None:
            # the tests already judged this very code: the run ends (the module's docstring)
            self.memory(state)["dead_end"] = judged
            return call
        if asked >= MAX_AGAIN or recalled.get("set_on_it"):
            # set on it: its samples repeated the reply once; on the spec and repository
            # suites the next time drew the same repeats (2 samples, 30-60 s, every such run)
            return call
        self.memory(state)["asked"] = asked + 1
        specs = executor.specs()
        # what the model would read next: its reply and why it changes nothing
        conversation: list[Message] = [*state.messages, {"role": "user", "content": str(nothing)}]
        base, shaped = loop.shape(conversation)
        # the reply's own tool alone: the same edit, made otherwise (a sample that picked
        # another mutating tool once ran `rm` on the library's module)
        schema = constrained.turn_schema([s for s in specs if s.name == call.name], answer=False)

        def ask(options: Mapping[str, Any]) -> str:
            request = replace(base, options=options, response_schema=schema)
            return str(loop.ask(state, request, shaped, by=self.name).message.get("content") or "")

        tool_names = frozenset(spec.name for spec in specs)
        limit = repair.sample_limit(ConstrainedCall(call.name, call.arguments), base.options)
        own = tool_request(call.name, call.arguments).signature
        tried = {own}
        tried.update(
            tool_request(e.name, e.arguments).signature
            for e in state.events
            if executor.is_mutating(e.name)
        )
        drawn = 0
        first: list[ConstrainedCall] = []

        def changes() -> Iterator[ConstrainedCall]:
            """The samples that change something the run has not changed or tried yet."""
            nonlocal drawn
            repeats = 0
            for sample in repair.sample_changes(ask, base.options, tool_names, limit, SAMPLES):
                drawn += 1
                request = tool_request(sample.name, sample.arguments)
                repeats = repeats + 1 if request.signature == own else 0
                if repeats >= SET_ON_IT:
                    # the model is set on its reply: more samples would repeat it too, now
                    # and later in the run
                    self.memory(state)["set_on_it"] = True
                    return
                if (
                    sample.name != call.name
                    or request.signature in tried
                    or changes_nothing(executor, request) is not None
                ):
                    continue
                tried.add(request.signature)
                yield sample

        def allowed(sample: ConstrainedCall) -> bool:
            if loop.refusal(state, tool_request(sample.name, sample.arguments)) is not None:
                return False
            if not first:
                first.append(sample)
            return True

        pool = changes()
        found, how = self._checked(loop, state, call, pool, allowed)
        if found is None:
            # no check to choose by, or none chose one: the first change no assist refuses
            how = "the first that changes something"
            try:
                found = first[0] if first else next((s for s in pool if allowed(s)), None)
            except RuneError as err:
                loop.note(state, f"could not ask the model again: {err}")
        whose = call.arguments.get("path") or "the file"
        if found is None:
            loop.note(
                state,
                f"the model re-sent {whose} as it is; none of {drawn} replies Rune asked for "
                "again changes it otherwise",
            )
            return call
        loop.note(
            state,
            f"the model re-sent {whose} as it is; Rune asked again (sampled): of {drawn} "
            f"replies, it takes {how}",
        )
        return tool_request(found.name, found.arguments, None, call.source)

    def after_calls(self, loop: Loop, state: LoopState) -> OperatorResponse | None:
        """The run ends once the model re-sent a change the tests already failed."""
        judged = self.recalled(state).get("dead_end")
        if judged is None:
            return None
        del self.memory(state)["dead_end"]
        return loop.finished(
            state,
            f"Stopped: the model sent its change to {judged} again, as the file already has "
            "it, and the project's tests fail with it.",
        )

    def _checked(
        self,
        loop: Loop,
        state: LoopState,
        call: ToolRequest,
        samples: Iterator[ConstrainedCall],
        allowed: Callable[[ConstrainedCall], bool],
    ) -> tuple[ConstrainedCall | None, str]:
        """The sample the run's failed check picks (:func:`rune.assists.repair.pick`) and how;
        (None, "") without a check that can tell (the samples are left undrawn)."""
        check = failed_test_run(state.events)
        trials = trials_of(self._trials, loop.executor)
        if check is None or trials is None:
            return None, ""
        own = trials.try_change(call.name, call.arguments, check.name, check.arguments)
        before = trials.try_before_changes(check.name, check.arguments)
        if own is None or before is None or before.passed or before.own_fault:
            return None, ""

        def attempt(sample: ConstrainedCall) -> Trial | None:
            if not allowed(sample):
                return Trial(passed=False, report="refused", made=False)
            return trials.try_change(sample.name, sample.arguments, check.name, check.arguments)

        found = repair.pick(
            samples,
            attempt,
            own,
            stuck=True,
            tried=set(),
            baseline=testing.tally(check.error or ""),
        )
        if found.call is None:
            return None, ""
        if found.passes:
            return found.call, "one that passes the tests"
        if found.fewer is not None:
            left = found.fewer[1]
            return found.call, f"one that leaves {left} of the tests failing, fewer than now"
        return found.call, "one that changes what the tests report, as most of them do"
