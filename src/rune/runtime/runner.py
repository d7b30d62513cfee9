"""``Runner``: the capped tool loop, for any :class:`~rune.runtime.protocol.ToolProtocol`.

``run`` chooses the protocol and puts its prompt ahead of the conversation; ``_loop`` answers the
queued calls (:mod:`rune.runtime.calls`), runs the assists' hooks, and makes one model call a
turn until the answer or the cap. The loop's one diagram is in docs/loop.md.

Everything that can go wrong inside the loop ends as ``OperatorResponse(success=False)``
with the events so far; the same failing call twice stops the run (rune.runtime.breaker).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rune import events as ev
from rune.errors import RuneError, ToolsUnsupported
from rune.limits import MAX_ITERATIONS
from rune.messages import ChatResult, Message, OperatorResponse, ToolEvent, ToolRequest
from rune.pause.state import NATIVE, TEXT_FALLBACK, LoopState, PendingState, unseal
from rune.runtime.assist import Assist, Hooks
from rune.runtime.calls import Calls
from rune.runtime.chat import ChatRequest, RequestShaper, ShapedRequest, transport_failure
from rune.runtime.endings import Endings
from rune.runtime.protocol import ToolProtocol, Turn
from rune.runtime.protocols import PROTOCOLS, choose_protocol, likely_protocol, standard_protocol
from rune.runtime.settings import check_settings
from rune.tools.spec import Executor
from rune.transport.base import Transport

__all__ = ["PROTOCOLS", "Runner"]  # PROTOCOLS: re-exported from rune.runtime.protocols


class Runner(Calls):
    """Drives one model through tool calls until it answers, pauses, or must stop.

    ``max_iterations`` (1–8) caps the model calls of one ``run`` including its resumes;
    ``protocol`` is a name of :data:`PROTOCOLS` or a :class:`ToolProtocol` of the caller's;
    ``assists`` are called at fixed points (:mod:`rune.runtime.assist`); ``seal_key`` seals
    pending states (by default the per-user key in Rune's data directory, :mod:`rune.pause.seal`).
    """

    def __init__(
        self,
        transport: Transport,
        executor: Executor,
        *,
        model: str,
        max_iterations: int = MAX_ITERATIONS,
        think: bool | None = None,
        options: Mapping[str, Any] | None = None,
        shaper: RequestShaper | None = None,
        on_event: ev.EventSink | None = None,
        protocol: str | ToolProtocol = "auto",
        seal_key: bytes | None = None,
        assists: Sequence[Assist] = (),
    ) -> None:
        check_settings(max_iterations, protocol, seal_key)
        super().__init__(executor, on_event or ev.ignore, seal_key)
        self.protocol = protocol if isinstance(protocol, str) else protocol.name
        self.transport = transport
        self.model = model
        self.max_iterations = max_iterations
        self.think = think
        self.options = dict(options) if options else None
        self.shaper = shaper
        self.assists = tuple(assists)
        self.hooks = Hooks(self.assists)
        self.endings = Endings(max_iterations, tuple(executor.specs()), self.emit)
        self.kinds = self.endings.kinds
        #: the protocols by the name a loop state keeps: the setting's now, another when used
        self._own_protocol = not isinstance(protocol, str)
        if isinstance(protocol, str):
            likely, source = likely_protocol(protocol), transport.native_source
            protocol = standard_protocol(likely, executor.specs(), source)
        self._protocols: dict[str, ToolProtocol] = {protocol.name: protocol}

    # --- public API ---------------------------------------------------------------------

    def run(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        opening: int | None = None,
        earlier: Sequence[ToolEvent] = (),
    ) -> OperatorResponse:
        """Run the loop on an Ollama-style conversation. Tool calls of a final assistant
        message that have no result yet (a conversation saved by a process that died
        mid-turn) are executed first, before the model is asked again. ``opening``: where the
        request this run works on is in ``messages`` (by default the last message, when it is
        the user's); ``earlier``: the turn's tool events before this run (``LoopState``)."""
        try:
            name = self._choose_protocol()
        except RuneError as err:
            return self.endings.before_loop(err)
        except Exception as err:  # a transport that broke its contract
            return self.endings.before_loop(transport_failure(err))
        history: list[Message] = [dict(m) for m in messages]
        state = LoopState(messages=history, protocol=name, earlier=list(earlier))
        protocol = self.protocol_of(state)
        state.queue = protocol.unanswered_calls(history)
        given = len(history)
        self._inject_prompt(state, protocol)
        state.place_opening(opening, given)
        if state.opening == len(state.messages) - 1:
            for assist in self.hooks.start:
                assist.start(self, state)
        return self._loop(state)

    def _choose_protocol(self) -> str:
        if self._own_protocol:
            return self.protocol
        return choose_protocol(self.protocol, lambda: self.transport.supports_tools(self.model))

    def approve(self, pending_state: PendingState | Mapping[str, Any]) -> OperatorResponse:
        """Apply the prepared change the state waits on (after re-validation), then go on.

        ``pending_state`` is ``OperatorResponse.pending_state`` (plain JSON, from this process
        or another) or a :class:`rune.pause.state.PendingState`; either way its seal is
        checked."""
        return self._resume(pending_state, None)

    def reject(
        self, pending_state: PendingState | Mapping[str, Any], reason: str = ""
    ) -> OperatorResponse:
        """Refuse the prepared change; the model hears why and the loop goes on."""
        return self._resume(pending_state, reason)

    def _resume(
        self, pending_state: PendingState | Mapping[str, Any], rejected: str | None
    ) -> OperatorResponse:
        try:
            pending = unseal(pending_state, self._key)
        except RuneError as err:
            return self.endings.before_loop(err)
        state, request, change = pending.loop_state(), pending.request, pending.change
        self._restore_grants(pending)
        if rejected is not None:
            self._reject(state, request, rejected, preview=change.preview)
        else:
            stop = self._apply(state, request, change)
            if stop is not None:
                return stop
        state.queue.pop(0)
        return self._loop(state)

    # --- the loop -----------------------------------------------------------------------

    def _loop(self, state: LoopState) -> OperatorResponse:
        while True:
            stop = self._answer_queue(state)
            if stop is not None:
                return stop
            for assist in self.hooks.after_calls:
                stop = assist.after_calls(self, state)
                if stop is not None:
                    return stop
            if state.iterations_used >= self.max_iterations:
                return self.endings.iteration_limit(state)
            state.iterations_used += 1
            self.emit(ev.IterationStarted(state.iterations_used, self.max_iterations))
            try:
                try:
                    result = self._chat(state)
                except ToolsUnsupported as err:
                    if state.protocol != NATIVE:
                        raise
                    # Capability discovery said tools; the server disagrees. Switch this run to
                    # the text-fallback protocol and repeat the call: it produced no turn.
                    self._switch_protocol(state, TEXT_FALLBACK, str(err))
                    result = self._chat(state)
            except RuneError as err:
                return self.endings.failure(state, str(err), err.kind)
            except BrokenPipeError:
                raise  # the reader of Rune's own output went away (rune ... | head): exit 141
            except Exception as err:  # a transport that broke its contract (KeyboardInterrupt
                # is not an Exception: it still interrupts)
                failed = transport_failure(err)
                return self.endings.failure(state, str(failed), failed.kind)
            stop = self._take_turn(state, result)
            if stop is not None:
                return stop

    def _chat(self, state: LoopState) -> ChatResult:
        self.endings.announce(state)
        allowed = all([a.answer_allowed(self, state) for a in self.hooks.answer_allowed])
        think = self.think if self.think is not None and self._supports_thinking() else None
        request = self.protocol_of(state).request(
            state.messages, think=think, options=self.options, sink=self.emit, answer=allowed
        )
        request, shaped = request.shaped(self.shaper, self.model)
        if shaped is not None and shaped.evicted:
            state.evicted.extend(shaped.evicted)
        result = request.send(self.transport, self.model)
        if self.shaper is not None and shaped is not None:
            self.shaper.observe(shaped, result)
        for warning in result.warnings:
            self.note(state, warning)
        for assist in self.hooks.replace_reply:
            replaced = assist.replace_reply(self, state, request, shaped, result)
            for warning in replaced.warnings if replaced is not result else ():
                self.note(state, warning)
            result = replaced
        return result

    def _supports_thinking(self) -> bool:
        try:
            return self.transport.supports_thinking(self.model)
        except RuneError:
            return False

    def _take_turn(self, state: LoopState, result: ChatResult) -> OperatorResponse | None:
        """Record the assistant turn; queue its calls, or finish on its answer."""
        protocol = self.protocol_of(state)
        turn: Turn = protocol.read_turn(result)
        if turn.thinking:
            state.thinking = turn.thinking
        state.messages.append(turn.message)
        calls = turn.calls
        if calls:
            if len(calls) == 1 and self.hooks.replace_call and protocol.turn_message(calls[0]):
                calls = [self._replaced(state, protocol, calls[0])]
            state.new_turn(calls)
            return None
        if turn.unusable is not None:
            state.messages.append({"role": "user", "content": turn.unusable.feedback})
            return self._count_failure(state, turn.unusable.name, turn.unusable.signature)
        return self._answer(state, turn.answer or "", result.done_reason)

    def _replaced(self, state: LoopState, protocol: ToolProtocol, call: ToolRequest) -> ToolRequest:
        """The turn's one call, or what an assist puts in its place (the turn says so too)."""
        replaced = call
        for assist in self.hooks.replace_call:
            replaced = assist.replace_call(self, state, replaced)
        message = protocol.turn_message(replaced) if replaced is not call else None
        if message is not None:
            state.messages[-1] = message
        return replaced

    def _answer(
        self, state: LoopState, text: str, done_reason: str | None = None
    ) -> OperatorResponse | None:
        """The model's final answer ends the run, unless an assist sends it back."""
        for assist in self.hooks.before_answer:
            reminder = assist.before_answer(self, state)
            if reminder is not None:
                state.messages.append({"role": "user", "content": reminder})
                return None
        also = self.unfinished_reasons(state)
        return self.endings.finished(state, text, cut_off=done_reason == "length", also=also)

    # --- protocols ----------------------------------------------------------------------

    def protocol_of(self, state: LoopState) -> ToolProtocol:
        try:
            return self._protocols[state.protocol]
        except KeyError:
            specs, source = self.executor.specs(), self.transport.native_source
            protocol = self._protocols[state.protocol] = standard_protocol(
                state.protocol, specs, source
            )
            return protocol

    def _switch_protocol(self, state: LoopState, name: str, reason: str) -> None:
        state.protocol = name
        self.note(state, f"{reason}; switched to the text-fallback tool protocol")
        self._inject_prompt(state, self.protocol_of(state))

    def _inject_prompt(self, state: LoopState, protocol: ToolProtocol) -> None:
        """The protocol's prompt, after the caller's system messages and before the
        conversation: a stable prefix for the prompt cache."""
        prompt = protocol.prompt()
        if prompt is None:
            return
        state.put_system(prompt)
        self.emit(ev.FallbackPromptInjected(self.model, prompt, protocol.name))

    # --- what assists may ask (rune.runtime.assist.Loop) --------------------------------

    def finished(self, state: LoopState, text: str) -> OperatorResponse:
        return self.endings.finished(state, text)

    def unfinished_reasons(self, state: LoopState, *, besides: Assist | None = None) -> list[str]:
        reasons = (a.unfinished(self, state) for a in self.hooks.unfinished if a is not besides)
        return [r for r in reasons if r]

    def shape(self, messages: Sequence[Message]) -> tuple[ChatRequest, ShapedRequest | None]:
        return ChatRequest(messages, options=self.options).shaped(self.shaper, self.model)

    def ask(
        self, state: LoopState, request: ChatRequest, shaped: ShapedRequest | None, *, by: str
    ) -> ChatResult:
        self.emit(ev.AssistModelCall(by, state.iterations_used))
        result = request.send(self.transport, self.model)
        if self.shaper is not None and shaped is not None:
            self.shaper.observe(shaped, result)
        return result
