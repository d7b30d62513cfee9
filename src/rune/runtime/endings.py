"""How a run ends: the :class:`OperatorResponse` that carries the loop's state out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rune import events as ev
from rune import outcome
from rune.errors import RuneError
from rune.messages import OperatorResponse
from rune.pause.state import LoopState
from rune.text import plural
from rune.tools.spec import ToolSpec

__all__ = ["Endings", "tool_kinds"]


def tool_kinds(specs: Sequence[ToolSpec]) -> outcome.ToolKinds:
    """Which tools change files, run commands, check: what :mod:`rune.outcome` reads."""
    return outcome.ToolKinds(
        changes=frozenset(s.name for s in specs if s.mutating and not (s.command or s.checks)),
        commands=frozenset(s.name for s in specs if s.command),
        checks=frozenset(s.name for s in specs if s.checks),
    )


class Endings:
    """The responses of one loop: an answer, a failure, a pause; each with the budget, the
    history, the events and the warnings so far."""

    def __init__(
        self, max_iterations: int, specs: Sequence[ToolSpec], on_event: ev.EventSink = ev.ignore
    ) -> None:
        self.max_iterations = max_iterations
        self.kinds = tool_kinds(specs)
        self.on_event = on_event

    def announce(self, state: LoopState) -> None:
        """Send the messages added since the last time (``events.MessageAdded``): before each
        model call, and when the run returns."""
        fresh = state.unannounced()
        if self.on_event is not ev.ignore:  # no event is built that nobody hears
            for message in fresh:
                self.on_event(ev.MessageAdded(message))

    def respond(self, state: LoopState, **fields: Any) -> OperatorResponse:
        self.announce(state)
        fields.setdefault("events", tuple(state.events))
        return OperatorResponse(
            iterations_used=state.iterations_used,
            iteration_budget=self.max_iterations,
            messages=tuple(state.messages),
            thinking=state.thinking,
            protocol=state.protocol,
            warnings=tuple(state.warnings),
            evicted=tuple(state.evicted),
            **fields,
        )

    def finished(
        self,
        state: LoopState,
        text: str,
        *,
        cut_off: bool = False,
        also: Sequence[str | None] = (),
    ) -> OperatorResponse:
        """The run's end with ``text`` as its answer (the model's, or an assist's), unfinished
        as :mod:`rune.outcome` finds it, and for the reasons in ``also`` (an assist's)."""
        turn = [*state.earlier, *state.events]  # the whole turn, over budgets and resumptions
        found = outcome.problems(turn, self.kinds)
        # The reply stopped at the output cap: what came is not the whole answer.
        reasons = [outcome.incomplete_reason(found), *also, outcome.CUT_OFF if cut_off else None]
        reason = "; ".join(r for r in reasons if r) or None
        return self.respond(
            state,
            success=True,
            text=text,
            incomplete=reason,
            changed=outcome.changed(turn, self.kinds),
        )

    def failure(self, state: LoopState, error: str, kind: str) -> OperatorResponse:
        return self.respond(state, success=False, error=error, error_kind=kind)

    def iteration_limit(self, state: LoopState) -> OperatorResponse:
        """The run's end when the model used its budget without a final answer."""
        used = plural(self.max_iterations, "iteration")
        return self.failure(
            state,
            f"iteration limit: the model used its {used} without a final answer",
            "IterationLimit",
        )

    def before_loop(self, err: RuneError) -> OperatorResponse:
        return OperatorResponse(
            success=False,
            error=str(err),
            error_kind=err.kind,
            iterations_used=0,
            iteration_budget=self.max_iterations,
        )
