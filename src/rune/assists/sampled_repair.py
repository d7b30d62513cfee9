"""Sampled repair, as an assist: another change in place of one the run's failed check rejects.

The rule and the numbers are :mod:`rune.assists.repair`'s. This module puts it at the loop's
``replace_call`` point: when the turn's one call is a change that the run's last failed check
shows to be wrong (tried with :class:`rune.tools.spec.Trials`, nothing written), it draws other
changes from a fresh start (the system context and the request) through the loop's
:meth:`~rune.runtime.assist.Loop.ask`, so the budget and the events see each of them. Where the
check is the project's tests, the first candidates are the changed function written afresh
from its docstring (:func:`rune.assists.afresh.afresh_samples`): the tests tell a right rewrite
from a wrong one, which the model's own check could not. When the rewrites fail, fewer samples
from a fresh start follow (:data:`rune.assists.repair.SAMPLES_AFTER_REWRITES`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from itertools import chain
from typing import Any

from rune.assists import repair
from rune.assists.afresh import afresh_samples
from rune.assists.rewrite import RewriteFromDocstring, written_afresh
from rune.assists.tests import started_with_tests
from rune.calls import tool_request
from rune.formats import constrained
from rune.formats.constrained import ConstrainedCall
from rune.messages import ToolRequest
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.runtime.breaker import LOOP_SOURCE
from rune.tools import testing
from rune.tools.spec import Trial, Trials, trials_of

__all__ = ["SampledRepair"]


class SampledRepair(Assist):
    """Puts a sampled change that passes the failed check in place of the model's."""

    name = "repair"

    def __init__(self, trials: Trials | None = None) -> None:
        #: None: the loop's executor, when it is one (looked at only when a repair may start)
        self._trials = trials
        self._schema: Mapping[str, Any] | None = None

    def replace_call(self, loop: Loop, state: LoopState, call: ToolRequest) -> ToolRequest:
        specs = loop.executor.specs()
        check_tools = frozenset(spec.name for spec in specs if spec.checks)
        check = repair.failed_check(state.events, check_tools)
        recalled = self.recalled(state)
        more = min(recalled.get("progress", 0), repair.MAX_MORE_REPAIRS)
        if (
            check is None
            or state.opening is None
            or recalled.get("repairs", 0) >= repair.MAX_REPAIRS + more
            or not loop.executor.is_mutating(call.name)
        ):
            return call
        trials = trials_of(self._trials, loop.executor)
        if trials is None:
            return call

        def attempt(change: ConstrainedCall) -> Trial | None:
            refusal = loop.refusal(state, tool_request(change.name, change.arguments))
            if refusal is not None:
                return Trial(passed=False, report=refusal, made=False)
            return trials.try_change(change.name, change.arguments, check.name, check.arguments)

        if loop.refusal(state, call) is not None:
            return call  # refused as it is: the model hears why
        own = attempt(ConstrainedCall(call.name, call.arguments))
        if own is None or own.passed or own.own_fault:
            return call
        before = trials.try_before_changes(check.name, check.arguments)
        if before is None or before.passed or before.own_fault:
            # The code as it was passes the check too: it does not show the bug, so it cannot
            # tell a fix from another change (a small model asserted the buggy behaviour).
            # Or the check is broken itself: nothing the project does can pass it.
            return call
        now = testing.tally(check.error or "")  # the code as it is
        if repair.only_others_fail(own, before, now):
            return call
        memory = self.memory(state)
        # A later repair asks from the same fresh start: the same seeds would draw the very
        # same samples again (a spec task redrew six identical ones, 75 s for nothing).
        first_seed = repair.FIRST_SEED + repair.SAMPLES * memory.get("repairs", 0)
        memory["repairs"] = memory.get("repairs", 0) + 1
        # the request, and what the tests said of the code as the run found it
        fresh = state.messages[: state.opening + (2 if started_with_tests(state) else 1)]
        base, shaped = loop.shape(fresh)
        if self._schema is None:
            # file changes only: a sample is tried over a copy of the files, which a command
            # cannot be (and a command drawn here would be a sample spent for nothing)
            changes = [s for s in specs if s.mutating and not s.command]
            self._schema = constrained.turn_schema(changes, answer=False)
        schema = self._schema

        def ask(options: Mapping[str, Any]) -> str:
            request = replace(base, options=options, response_schema=schema)
            result = loop.ask(state, request, shaped, by=self.name)
            return str(result.message.get("content") or "")

        tool_names = frozenset(spec.name for spec in specs)
        limit = repair.sample_limit(ConstrainedCall(call.name, call.arguments), base.options)
        # the check is Rune's own test run, or one the model wrote
        by_rune = check.source == LOOP_SOURCE
        afresh: list[ConstrainedCall] = []

        def drawn() -> Iterator[ConstrainedCall]:
            # asked only once the rewrites, if any, were tried (and failed): fewer after them
            count = repair.SAMPLES_AFTER_REWRITES if afresh else repair.SAMPLES
            yield from repair.sample_changes(
                ask, base.options, tool_names, limit, count, first_seed=first_seed
            )

        samples: Iterator[ConstrainedCall] = drawn()
        if by_rune:
            report = check.error or ""
            samples = chain(self._afresh(loop, state, call, trials, report, afresh), samples)
        tried = {tool_request(call.name, call.arguments).signature}
        tried.update(
            tool_request(e.name, e.arguments).signature
            for e in state.events
            if loop.executor.is_mutating(e.name)
        )
        # what a sample must do better than: the code as it is, and the reply when it was made
        baseline = now
        if own.made and repair.progress(testing.tally(own.report), baseline):
            baseline = testing.tally(own.report)
        # A majority of samples that merely move the assert may break a check too strict to
        # pass; but not in place of a function Rune had written afresh from its docstring: a
        # wrong assert of the model's own (extended_gcd(10, 6) == (2, 1, -1)) then put a wrong
        # change in place of the right rewrite.
        stuck = own.report == check.error and (
            check.source == LOOP_SOURCE or not written_afresh(state, call)
        )
        found = repair.pick(
            samples,
            attempt,
            own,
            stuck=stuck,
            tried=tried,
            baseline=baseline,
            # with two bugs no change passes every test: one that fixes its own is all a
            # candidate can do (every repair of the multi suite drew all its candidates)
            enough=lambda trial: repair.only_others_fail(trial, before, now),
        )
        if found.error is not None:
            loop.note(state, f"could not ask the model for other changes: {found.error}")
        if found.call is None:
            return call
        whose, it = ("the project's tests", "them") if by_rune else ("its own check", "that check")
        written = any(found.call is c for c in afresh)
        how = "afresh from its docstring" if written else "from a fresh start"
        if found.passes and written:
            loop.note(
                state,
                f"the model's change failed {whose}; Rune asked it to write "
                f"{found.call.arguments['name']} afresh from its docstring, and that passes {it}",
            )
        elif found.passes:
            loop.note(
                state,
                f"the model's change failed {whose}; of {found.drawn} other changes it "
                f"wrote from a fresh start, this one passes {it}",
            )
        elif found.fewer is not None and baseline is not None:
            memory["progress"] = memory.get("progress", 0) + 1
            loop.note(
                state,
                f"the model's change failed {whose}; none of {found.drawn} other changes it "
                f"wrote passes {it}; this one, written {how}, leaves {found.fewer[1]} "
                f"failing instead of {baseline[1]}",
            )
        else:
            loop.note(
                state,
                f"the model kept sending a change that failed {whose} the same way; none of "
                f"{found.drawn} other changes it wrote passes {it}; this one, written {how}, "
                "changes what the check reports as most of them do",
            )
        return tool_request(found.call.name, found.call.arguments, None, call.source)

    def _afresh(
        self,
        loop: Loop,
        state: LoopState,
        call: ToolRequest,
        trials: Trials,
        report: str,
        made: list[ConstrainedCall],
    ) -> Iterator[ConstrainedCall]:
        """The changed function, and those the failing tests' ``report`` points at, written
        afresh from their docstrings (each kept in ``made``), each request once a run: the
        project's tests judge them, so a right rewrite is known as one (the model's own checks
        were as often wrong as its rewrites)."""
        # the list in the run's state itself: a request is remembered as it is made, though
        # the repair stops drawing at the first candidate that passes
        asked = self.memory(state).setdefault("afresh", [])
        written = afresh_samples(
            loop, state, call, trials, report, asked, by=RewriteFromDocstring.name
        )
        for rewrite in written:
            made.append(rewrite)
            yield rewrite
