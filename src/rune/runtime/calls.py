"""Answering the calls of a turn: the half of the loop between two model calls.

Each queued call gets exactly one result, in order, so the conversation is always well-formed
for the next model call: an identical call already answered this turn gets that answer again
(dedup), a call past :data:`rune.limits.MAX_CALLS_PER_TURN` is refused, a call whose arguments
cannot be used is started and then fails, a read-only call runs, and a mutating call is
prepared and pauses the run with a sealed :class:`rune.pause.state.PendingState`.
"""

from __future__ import annotations

from typing import cast

from rune import events as ev
from rune.calls import is_unusable, unusable_error
from rune.errors import CommandFailed, RuneError, SandboxDenied, ToolError
from rune.limits import MAX_CALLS_PER_TURN
from rune.messages import OperatorResponse, ToolEvent, ToolRequest, ToolStatus
from rune.pause.seal import load_or_create_key
from rune.pause.state import LoopState, PendingState
from rune.runtime.assist import Hooks, Loop
from rune.runtime.breaker import same_again, tripped
from rune.runtime.endings import Endings
from rune.runtime.protocol import ToolProtocol
from rune.tools.spec import Executor, GrantsReads, NeedsApproval, PreparedChange

__all__ = ["REJECTED", "Calls"]

#: how the result of a rejected change begins (the operator's reason follows)
REJECTED = "rejected by the operator: "


class Calls:
    """The loop's calls to the executor, and the events, results and pauses they make. It is
    the half of :class:`rune.runtime.runner.Runner` that answers calls: the Runner is what
    the assists see (``cast(Loop, self)``)."""

    model: str
    max_iterations: int
    hooks: Hooks
    endings: Endings

    def __init__(self, executor: Executor, on_event: ev.EventSink, seal_key: bytes | None) -> None:
        self.executor = executor
        self.on_event = on_event
        #: where every event goes (the sink itself: this is called for every delta)
        self.emit: ev.EventSink = on_event
        self._seal_key = seal_key

    def protocol_of(self, state: LoopState) -> ToolProtocol:
        raise NotImplementedError

    def note(self, state: LoopState, warning: str) -> None:
        """A warning: kept with the response and sent as an event."""
        state.warnings.append(warning)
        self.emit(ev.Warning(warning))

    def refusal(self, state: LoopState, request: ToolRequest) -> str | None:
        """Why an assist forbids the change ``request``, or None."""
        for assist in self.hooks.refusal:
            refusal = assist.refusal(cast(Loop, self), state, request)
            if refusal is not None:
                return refusal
        return None

    # --- the queue ----------------------------------------------------------------------

    def _answer_queue(self, state: LoopState) -> OperatorResponse | None:
        while state.queue:
            request = state.queue[0]
            done = state.batch_done.get(request.signature)
            if done is not None:
                # An identical call in the same turn: answer its id, do not run it again.
                message = self.protocol_of(state).result_message(request, done[1], ok=done[0])
                state.messages.append(message)
                state.queue.pop(0)
                continue
            if is_unusable(request):
                # Started, then failed at once: every finished call was started first.
                self.emit(ev.ToolStarted(request, state.iterations_used))
                stop = self._record_failure(state, request, unusable_error(request))
            elif state.turn_calls >= MAX_CALLS_PER_TURN:
                self._refuse_over_cap(state, request)
                stop = None
            else:
                state.turn_calls += 1
                mutating = self.executor.is_mutating(request.name)
                stop = (self._prepare if mutating else self._dispatch)(state, request)
            if stop is not None:
                return stop
            state.queue.pop(0)
        return None

    def _refuse_over_cap(self, state: LoopState, request: ToolRequest) -> None:
        """Answer a call past the per-turn cap without running it (not a failure of the tool:
        the breaker does not count it)."""
        message = f"Error: not run: at most {MAX_CALLS_PER_TURN} tool calls run per turn; ask again"
        if (False, message) not in state.batch_done.values():
            warning = (
                f"the model asked for more than {MAX_CALLS_PER_TURN} tool calls in one turn; "
                f"{len(state.queue)} more were answered with an error, not run"
            )
            self.note(state, warning)
        self._answer_call(state, request, message, ok=False)

    def _dispatch(self, state: LoopState, request: ToolRequest) -> OperatorResponse | None:
        self.emit(ev.ToolStarted(request, state.iterations_used))
        try:
            output = self.executor.run(request.name, request.arguments)
        except NeedsApproval as needed:
            return self._pause(state, request, needed.change)
        except Exception as err:
            return self._record_failure(state, request, err)
        # a check made again is the check assist's to judge (it counts identical checks once)
        again = (
            None
            if request.name in self.endings.kinds.checks
            else same_again(state, request.signature, output)
        )
        if again is not None:
            return self._record_failure(state, request, ToolError(again))
        self._record_success(state, request, output)
        return None

    def _prepare(self, state: LoopState, request: ToolRequest) -> OperatorResponse | None:
        self.emit(ev.ToolStarted(request, state.iterations_used))
        refusal = self.refusal(state, request)
        if refusal is not None:
            return self._record_failure(state, request, ToolError(refusal))
        try:
            change = self.executor.prepare(request.name, request.arguments)
        except Exception as err:
            return self._record_failure(state, request, err)
        return self._pause(state, request, change)

    # --- results ------------------------------------------------------------------------

    def _record_success(
        self, state: LoopState, request: ToolRequest, output: str, *, preview: str | None = None
    ) -> None:
        state.streak_signature, state.streak_count = None, 0
        self._finish(state, request, "done", output, output=output, preview=preview)

    def _record_failure(
        self,
        state: LoopState,
        request: ToolRequest,
        err: Exception,
        *,
        preview: str | None = None,
    ) -> OperatorResponse | None:
        message = str(err) if isinstance(err, RuneError) else f"internal error: {err!r}"
        status: ToolStatus = "denied" if isinstance(err, SandboxDenied) else "failed"
        exit_code = err.exit_code if isinstance(err, CommandFailed) else None
        self._finish(
            state,
            request,
            status,
            f"Error: {message}",
            error=message,
            preview=preview,
            exit_code=exit_code,
        )
        return self._count_failure(state, request.name, request.signature)

    def _apply(
        self, state: LoopState, request: ToolRequest, change: PreparedChange
    ) -> OperatorResponse | None:
        """Apply an approved change; its result answers the call."""
        try:
            output = self.executor.apply(change)
        except Exception as err:
            return self._record_failure(state, request, err, preview=change.preview)
        self._record_success(state, request, output, preview=change.preview)
        return None

    def _reject(self, state: LoopState, request: ToolRequest, reason: str, preview: str) -> None:
        message = f"{REJECTED}{reason.strip() or '(no reason given)'}"
        self._finish(state, request, "rejected", message, error=message, preview=preview)

    def _finish(
        self,
        state: LoopState,
        request: ToolRequest,
        status: ToolStatus,
        result: str,
        *,
        output: str | None = None,
        error: str | None = None,
        preview: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        """A call's end: ``result`` answers it, its event is recorded and sent."""
        for assist in self.hooks.after_result:
            result += assist.after_result(cast(Loop, self), state, request, status)
        self._answer_call(state, request, result, ok=status == "done")
        event = self.tool_event(
            state, request, status, output=output, error=error, preview=preview, exit_code=exit_code
        )
        state.events.append(event)
        self.emit(ev.ToolFinished(event))

    def _answer_call(
        self, state: LoopState, request: ToolRequest, result: str, *, ok: bool
    ) -> None:
        state.messages.append(self.protocol_of(state).result_message(request, result, ok=ok))
        state.batch_done[request.signature] = (ok, result)

    def _count_failure(
        self, state: LoopState, name: str, signature: str
    ) -> OperatorResponse | None:
        stop = tripped(state, name, signature)
        return None if stop is None else self.endings.failure(state, stop, "CircuitBreaker")

    def tool_event(
        self,
        state: LoopState,
        request: ToolRequest,
        status: ToolStatus,
        *,
        output: str | None = None,
        error: str | None = None,
        preview: str | None = None,
        exit_code: int | None = None,
    ) -> ToolEvent:
        return ToolEvent(
            name=request.name,
            arguments=request.arguments,
            status=status,
            source=request.source,
            output=output,
            error=error,
            call_id=request.call_id,
            iteration=state.iterations_used,
            preview=preview,
            exit_code=exit_code,
        )

    # --- pause and resume ---------------------------------------------------------------

    def _pause(
        self, state: LoopState, request: ToolRequest, change: PreparedChange
    ) -> OperatorResponse:
        grants = self.executor.read_grants() if isinstance(self.executor, GrantsReads) else ()
        pending = PendingState.of(
            state,
            model=self.model,
            iteration_budget=self.max_iterations,
            change=change,
            grants=grants,
        )
        self.emit(ev.ApprovalRequired(pending.approval))
        waiting = self.tool_event(state, request, "pending_approval", preview=change.preview)
        try:
            sealed = pending.sealed(self._key())
        except RuneError as err:
            return self.endings.failure(state, f"cannot seal the approval: {err}", err.kind)
        return self.endings.respond(
            state,
            success=False,
            events=(*state.events, waiting),
            pending=pending.approval,
            pause=sealed,
        )

    def _restore_grants(self, pending: PendingState) -> None:
        """The reads the user approved before the pause (sealed with it): a state resumed in
        another process reads what this session was let read, and no more."""
        if pending.grants and isinstance(self.executor, GrantsReads):
            self.executor.restore_read_grants(pending.grants)

    def _key(self) -> bytes:
        if self._seal_key is None:
            self._seal_key = load_or_create_key()
        return self._seal_key
