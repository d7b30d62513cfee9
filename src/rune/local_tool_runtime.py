"""``LocalToolRuntime``: the capped tool loop.

::

    run(messages)
      └─ protocol "auto": transport.supports_tools(model) → native tool_calls, or the
         text-fallback protocol; "native", "text" and "constrained" (one JSON object per turn,
         constrained by the server's grammar: rune.constrained) are chosen by the caller
      └─ _run_loop: while True
           ├─ execute queued requests (dedup: name + canonical arguments)
           │    ├─ read-only → dispatch immediately (a read the executor says needs
           │    │               approval pauses like a change: NeedsApproval)
           │    └─ mutating  → prepare → pause with serializable pending_state
           ├─ iterations_used >= max_iterations → typed failure "iteration limit"
           ├─ same failing signature twice in a row → typed failure (circuit breaker)
           └─ transport.chat(...) → tool calls? loop : terminal visible text

Everything that can go wrong inside the loop ends as ``OperatorResponse(success=False)``
with the events so far — a transport that raises something other than a ``RuneError`` too
(``error_kind`` is the exception's class name); tool failures go back to the model as tool
messages. A reply is taken only in the shapes :mod:`rune.limits` allows, and at most
:data:`rune.limits.MAX_CALLS_PER_TURN` calls of one assistant turn run: the others are answered
with an error the model reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from rune import constrained, fallback, outcome, repair
from rune import events as ev
from rune.calls import is_unusable, native_request, tool_request, unusable_error
from rune.errors import (
    CommandFailed,
    ConfigError,
    RuneError,
    SandboxDenied,
    TestsNotRun,
    ToolError,
    ToolsUnsupported,
)
from rune.limits import MAX_CALLS_PER_TURN, MAX_ITERATIONS, MIN_ITERATIONS
from rune.messages import (
    ChatResult,
    Message,
    OperatorResponse,
    ToolEvent,
    ToolRequest,
    ToolStatus,
    leading_system,
    thaw,
)
from rune.seal import load_or_create_key
from rune.state import (
    CONSTRAINED,
    NATIVE,
    TEXT_FALLBACK,
    LoopState,
    PendingState,
    unseal,
)
from rune.tools.spec import (
    AutoCheck,
    AutoChecks,
    Executor,
    GrantsReads,
    NeedsApproval,
    PreparedChange,
    Trial,
    TriesChanges,
)
from rune.transport.base import Transport

__all__ = [
    "BREAKER_THRESHOLD",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "PROTOCOLS",
    "LocalToolRuntime",
    "RequestShaper",
    "ShapedRequest",
    "breaker_message",
]

BREAKER_THRESHOLD = 2
#: what ``protocol=`` takes: "auto" is Rune's rule (native when discovery says the model has
#: tools, else the text fallback; see docs/protocols.md); the others force one protocol
PROTOCOLS = ("auto", "native", "text", "constrained")
#: tool sources whose results go back as text (no ``tool_calls`` entry to answer)
_TEXT_SOURCES = ("text-fallback", "constrained")
#: how the result of a rejected change begins (the operator's reason follows)
REJECTED = "rejected by the operator: "
#: failed checks in one run after which the model may answer anyway (see _answer_withheld)
MAX_FAILED_CHECKS = 2
#: the source of the calls the loop makes itself (its auto check)
AUTO: Final = "rune"


def breaker_message(name: str, count: int) -> str:
    return (
        f"tool {name} failed {count} consecutive times with identical arguments — "
        "stopping before the iteration budget burns"
    )


@dataclass(frozen=True)
class ShapedRequest:
    """What one chat call sends: the messages after eviction, options such as ``num_ctx``."""

    messages: Sequence[Message]
    options: Mapping[str, Any] | None = None
    evicted: tuple[str, ...] = ()


class RequestShaper(Protocol):
    """Fits a request into the model's window (see ``rune.operator``). May raise
    :class:`rune.errors.ContextOverflow`; ``observe`` learns from the server's token counts."""

    def shape(self, model: str, messages: Sequence[Message]) -> ShapedRequest: ...

    def observe(self, shaped: ShapedRequest, result: ChatResult) -> None: ...


def repeat_message(name: str, count: int) -> str:
    return (
        f"tool {name} failed {count} times with identical arguments, with only failing calls "
        "between — stopping before the iteration budget burns"
    )


class LocalToolRuntime:
    """Drives one model through tool calls until it answers, pauses, or must stop.

    ``max_iterations`` (1–8) caps the model calls of one ``run`` including its resumes.
    ``seal_key`` seals pending states (:mod:`rune.seal`); by default it is the per-user key in
    Rune's data directory, created on the first pause.
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
        protocol: str = "auto",
        seal_key: bytes | None = None,
        auto_checks: AutoChecks | None = None,
    ) -> None:
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise ConfigError(f"max_iterations must be an integer, got {max_iterations!r}")
        if not MIN_ITERATIONS <= max_iterations <= MAX_ITERATIONS:
            raise ConfigError(
                f"max_iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, "
                f"got {max_iterations}"
            )
        if protocol not in PROTOCOLS:
            raise ConfigError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        self.protocol = protocol
        self.transport = transport
        self.executor = executor
        self.model = model
        self.max_iterations = max_iterations
        self.think = think
        self.options = dict(options) if options else None
        self.shaper = shaper
        self.on_event: ev.EventSink = on_event or ev.ignore
        if seal_key is not None and len(seal_key) < 16:
            raise ConfigError("seal_key must be at least 16 bytes")
        self._seal_key = seal_key
        self._auto_checks = auto_checks
        self._auto_by_request: dict[str, AutoCheck | None] = {}
        self._tool_names = frozenset(spec.name for spec in executor.specs())
        self._schemas = [spec.schema() for spec in executor.specs()]
        self._turn_schema = constrained.turn_schema(executor.specs())
        self._check_tools = frozenset(spec.name for spec in executor.specs() if spec.checks)
        self._kinds = outcome.ToolKinds(
            changes=frozenset(
                s.name for s in executor.specs() if s.mutating and not (s.command or s.checks)
            ),
            commands=frozenset(s.name for s in executor.specs() if s.command),
            checks=self._check_tools,
        )
        self._unanswerable_schema = constrained.turn_schema(executor.specs(), answer=False)
        self._change_schema = constrained.turn_schema(
            [spec for spec in executor.specs() if spec.mutating], answer=False
        )

    # --- public API ---------------------------------------------------------------------

    def run(
        self, messages: Sequence[Mapping[str, Any]], *, opening: int | None = None
    ) -> OperatorResponse:
        """Run the loop on an Ollama-style conversation.

        Tool calls of a final assistant message that have no result yet (a conversation saved
        by a process that died mid-turn) are executed first, before the model is asked again.
        ``opening``: where the request this run works on is in ``messages`` (by default the
        last message, when it is the user's).
        """
        try:
            protocol = self._choose_protocol()
        except RuneError as err:
            return self._failure_before_loop(err)
        except Exception as err:  # a transport that broke its contract
            return self._failure_before_loop(_transport_failure(err))
        history = [dict(m) for m in messages]
        state = LoopState(messages=history, protocol=protocol)
        state.queue = self._unanswered_calls(history, protocol)
        given = len(history)
        if protocol == TEXT_FALLBACK:
            self._inject_fallback_prompt(state)
        elif protocol == CONSTRAINED:
            prompt = constrained.constrained_prompt(self.executor.specs())
            self._inject_prompt(state, prompt, CONSTRAINED)
        injected = len(state.messages) - given
        if opening is not None and 0 <= opening < given:
            state.opening = opening + injected
        elif state.messages and state.messages[-1].get("role") == "user":
            state.opening = len(state.messages) - 1
        if state.opening == len(state.messages) - 1:
            auto = self._auto(state)
            if auto is not None:
                self._run_auto(state, auto, after_change=False)
        return self._run_loop(state)

    def _choose_protocol(self) -> str:
        if self.protocol == "constrained":
            return CONSTRAINED
        if self.protocol == "text":
            return TEXT_FALLBACK
        native = self.transport.supports_tools(self.model)
        return NATIVE if native or self.protocol == "native" else TEXT_FALLBACK

    def approve(self, pending_state: PendingState | Mapping[str, Any]) -> OperatorResponse:
        """Apply the prepared change the state waits on (after re-validation), then go on.

        ``pending_state`` is ``OperatorResponse.pending_state`` (plain JSON, from this process
        or another) or a :class:`rune.state.PendingState`; either way its seal is checked."""
        try:
            pending = unseal(pending_state, self._key)
        except RuneError as err:
            return self._failure_before_loop(err)
        state, request, change = pending.loop_state(), pending.request, pending.change
        self._restore_grants(pending)
        try:
            output = self.executor.apply(change)
        except Exception as err:
            stop = self._record_failure(state, request, err, preview=change.preview)
            if stop is not None:
                return stop
        else:
            self._record_success(state, request, output, preview=change.preview)
        state.queue.pop(0)
        return self._run_loop(state)

    def reject(
        self, pending_state: PendingState | Mapping[str, Any], reason: str = ""
    ) -> OperatorResponse:
        """Refuse the prepared change; the model hears why and the loop goes on."""
        try:
            pending = unseal(pending_state, self._key)
        except RuneError as err:
            return self._failure_before_loop(err)
        state, request = pending.loop_state(), pending.request
        self._restore_grants(pending)
        message = f"{REJECTED}{reason.strip() or '(no reason given)'}"
        self._finish(
            state, request, "rejected", message, error=message, preview=pending.change.preview
        )
        state.queue.pop(0)
        return self._run_loop(state)

    # --- the loop -----------------------------------------------------------------------

    def _run_loop(self, state: LoopState) -> OperatorResponse:
        while True:
            while state.queue:
                request = state.queue[0]
                done = state.batch_done.get(request.signature)
                if done is not None:
                    # An identical call in the same turn: answer its id, do not run it again.
                    self._append_result(state, request, done[1], ok=done[0])
                    state.queue.pop(0)
                    continue
                if is_unusable(request):
                    # Started, then failed at once: every finished call was started first.
                    self.on_event(ev.ToolStarted(request, state.iterations_used))
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

            stop = self._check_changes(state)
            if stop is not None:
                return stop
            if state.iterations_used >= self.max_iterations:
                return self._failure(
                    state,
                    f"iteration limit: the model used all {self.max_iterations} iterations "
                    "without a final answer",
                    "IterationLimit",
                )
            state.iterations_used += 1
            self.on_event(ev.IterationStarted(state.iterations_used, self.max_iterations))
            try:
                result = self._chat(state)
            except ToolsUnsupported as err:
                if state.protocol != NATIVE:
                    return self._failure(state, str(err), err.kind)
                # Capability discovery said tools; the server disagrees. Switch this run to the
                # text-fallback protocol and repeat the call: it produced no turn.
                self._switch_to_fallback(state, str(err))
                try:
                    result = self._chat(state)
                except RuneError as retry_err:
                    return self._failure(state, str(retry_err), retry_err.kind)
                except Exception as retry_err:
                    failed = _transport_failure(retry_err)
                    return self._failure(state, str(failed), failed.kind)
            except RuneError as err:
                return self._failure(state, str(err), err.kind)
            except Exception as err:  # a transport that broke its contract (KeyboardInterrupt
                # is not an Exception: it still interrupts)
                failed = _transport_failure(err)
                return self._failure(state, str(failed), failed.kind)
            stop = self._take_turn(state, result)
            if stop is not None:
                return stop

    def _chat(self, state: LoopState) -> ChatResult:
        shaped = (
            self.shaper.shape(self.model, state.messages)
            if self.shaper is not None
            else ShapedRequest(state.messages, self.options)
        )
        if shaped.evicted:
            state.evicted.extend(shaped.evicted)
        think = self.think if self.think is not None and self._supports_thinking() else None
        extra: dict[str, Any] = {}
        on_delta: Any = self.on_event
        if state.protocol == CONSTRAINED:
            # Passed only here, so a Transport written before structured output still works.
            extra["response_schema"] = (
                self._unanswerable_schema if self._answer_withheld(state) else self._turn_schema
            )
            on_delta = constrained.TurnStream(self.on_event)
        result = self.transport.chat(
            self.model,
            shaped.messages,
            tools=self._schemas if state.protocol == NATIVE else None,
            think=think,
            options=shaped.options,
            on_delta=on_delta,
            **extra,
        )
        if self.shaper is not None:
            self.shaper.observe(shaped, result)
        for warning in result.warnings:
            self._note(state, warning)
        return result

    def _supports_thinking(self) -> bool:
        try:
            return self.transport.supports_thinking(self.model)
        except RuneError:
            return False

    def _take_turn(self, state: LoopState, result: ChatResult) -> OperatorResponse | None:
        """Record the assistant turn; queue its calls, or finish on visible text."""
        message = result.message
        content = str(message.get("content") or "")
        if message.get("thinking"):
            state.thinking = str(message["thinking"])
        stored: Message = {"role": "assistant", "content": content}
        if message.get("thinking"):
            stored["thinking"] = message["thinking"]
        if state.protocol == CONSTRAINED:
            state.messages.append(stored)
            return self._take_constrained_turn(state, content, result.done_reason)
        native_calls = message.get("tool_calls") or ()
        if native_calls and state.protocol == NATIVE:
            stored["tool_calls"] = [thaw(c) for c in native_calls]
            state.messages.append(stored)
            state.new_turn([native_request(c, self.transport.native_source) for c in native_calls])
            return None
        state.messages.append(stored)
        parsed = fallback.parse_tool_calls(content, self._tool_names)
        if parsed.thinking and not message.get("thinking"):
            state.thinking = parsed.thinking
        if parsed.calls:
            state.new_turn(_text_requests(parsed))
            return None
        if parsed.error is not None and state.protocol == TEXT_FALLBACK:
            return self._protocol_error(state, parsed.error)
        return self._answer(state, parsed.visible_text, result.done_reason)

    def _owes_check(self, state: LoopState, name: str) -> bool:
        """Whether a call of ``name`` leaves a change to check (see :meth:`_answer_withheld`)."""
        return (
            state.protocol == CONSTRAINED
            and bool(self._check_tools)
            and self.executor.is_mutating(name)
            and self._auto(state) is None  # the loop runs the tests itself
        )

    def _answer_withheld(self, state: LoopState) -> bool:
        """Whether the next constrained turn may not be the answer (its schema leaves the
        answer form out). Small models call a wrong fix done, even right after seeing it fail
        (task suite, ``bench/README.md``), so with a check tool offered:

        - a change the model tried (made or failed) must be checked before it may answer;
        - a check that failed must be acted on (a new change, or another check), except after
          ``MAX_FAILED_CHECKS`` failed checks in the run: its own expectation may be wrong.

        A change the user rejected needs no check; without a check tool there is no rule.
        """
        if not self._check_tools:
            return False
        for event in reversed(state.events):
            if event.source == AUTO and event.iteration == 0:
                continue  # the tests as the run found them: nothing the model did
            if event.name in self._check_tools:
                if event.status == "done":
                    return False
                failed = sum(
                    1 for e in state.events if e.name in self._check_tools and e.status != "done"
                )
                return failed < MAX_FAILED_CHECKS
            if self.executor.is_mutating(event.name):
                return event.status != "rejected"
        return False

    def _take_constrained_turn(
        self, state: LoopState, content: str, done_reason: str | None
    ) -> OperatorResponse | None:
        turn = constrained.parse_turn(content, self._tool_names)
        if turn.call is not None:
            call = self._repaired(state, turn.call)
            if call is not turn.call:
                turn = constrained.ConstrainedTurn(call=call)
                state.messages[-1] = {"role": "assistant", "content": constrained.reply(call)}
            state.new_turn([_constrained_request(turn)])
            return None
        if turn.answer is not None:
            return self._answer(state, turn.answer, done_reason)
        error = turn.error or "the reply could not be read"
        if done_reason == "length":
            error += "; the reply hit the output token limit"
        feedback = f"Your reply could not be used: {error}. {constrained.format_hint()}"
        state.messages.append({"role": "user", "content": feedback})
        return self._count_failure(state, "reply", "<unusable reply>" + error)

    def _repaired(
        self, state: LoopState, call: constrained.ConstrainedCall
    ) -> constrained.ConstrainedCall:
        """``call``, or a change the model wrote from a fresh start that does better on the
        check ``call`` fails (:mod:`rune.repair`)."""
        executor = self.executor
        check = repair.failed_check(state.events, self._check_tools)
        if (
            check is None
            or state.opening is None
            or state.repairs >= repair.MAX_REPAIRS
            or not isinstance(executor, TriesChanges)
            or not executor.is_mutating(call.name)
        ):
            return call

        def attempt(change: constrained.ConstrainedCall) -> Trial | None:
            refusal = self._refusal(state, change.name, change.arguments)
            if refusal is not None:
                return Trial(passed=False, report=refusal, made=False)
            return executor.try_change(change.name, change.arguments, check.name, check.arguments)

        if self._refusal(state, call.name, call.arguments) is not None:
            return call  # refused as it is: the model hears why
        own = attempt(call)
        if own is None or own.passed or own.own_fault:
            return call
        before = executor.try_before_changes(check.name, check.arguments)
        if before is None or before.passed or before.own_fault:
            # The code as it was passes the check too: it does not show the bug, so it cannot
            # tell a fix from another change (a small model asserted the buggy behaviour).
            # Or the check is broken itself: nothing the project does can pass it.
            return call
        state.repairs += 1
        # the request, and what the tests said of the code as the run found it
        fresh = state.messages[: state.opening + (2 if self._started_with_tests(state) else 1)]
        shaped = self.shaper.shape(self.model, fresh) if self.shaper is not None else None
        samples = repair.sample_changes(
            self.transport,
            self.model,
            fresh if shaped is None else shaped.messages,
            schema=self._change_schema,
            options=self.options if shaped is None else shaped.options,
            tool_names=self._tool_names,
        )
        tried = {repair.signature(call)}
        tried.update(
            tool_request(e.name, e.arguments).signature
            for e in state.events
            if executor.is_mutating(e.name)
        )
        found = repair.pick(samples, attempt, own, stuck=own.report == check.error, tried=tried)
        if found.error is not None:
            self._note(state, f"could not ask the model for other changes: {found.error}")
        if found.call is None:
            return call
        if found.passes:
            self._note(
                state,
                f"the model's change failed its own check; of {found.drawn} other changes it "
                "wrote from a fresh start, this one passes that check",
            )
        else:
            self._note(
                state,
                f"the model kept sending a change its own check fails the same way; none of "
                f"{found.drawn} other changes it wrote from a fresh start passes that check, "
                "this one changes what the check reports as most of them do",
            )
        return found.call

    def _note(self, state: LoopState, warning: str) -> None:
        """A warning: kept with the response and sent as an event."""
        state.warnings.append(warning)
        self.on_event(ev.Warning(warning))

    def _unanswered_calls(self, history: Sequence[Message], protocol: str) -> list[ToolRequest]:
        """The calls of the last assistant message that the messages after it do not answer."""
        answered = 0
        for message in reversed(history):
            if message.get("role") == "tool":
                answered += 1
                continue
            if message.get("role") != "assistant":
                return []
            if message.get("tool_calls"):
                calls = message["tool_calls"][answered:]
                return [native_request(c, self.transport.native_source) for c in calls]
            if answered:
                return []
            content = str(message.get("content") or "")
            if protocol == CONSTRAINED:
                turn = constrained.parse_turn(content, self._tool_names)
                return [_constrained_request(turn)] if turn.call is not None else []
            return _text_requests(fallback.parse_tool_calls(content, self._tool_names))
        return []

    def _refuse_over_cap(self, state: LoopState, request: ToolRequest) -> None:
        """Answer a call past the per-turn cap without running it (not a failure of the tool:
        the breaker does not count it)."""
        message = f"Error: not run: at most {MAX_CALLS_PER_TURN} tool calls run per turn; ask again"
        if (False, message) not in state.batch_done.values():
            warning = (
                f"the model asked for more than {MAX_CALLS_PER_TURN} tool calls in one turn; "
                f"{len(state.queue)} more were answered with an error, not run"
            )
            self._note(state, warning)
        self._answer_call(state, request, message, ok=False)

    def _protocol_error(self, state: LoopState, error: str) -> OperatorResponse | None:
        """A reply that tried to call a tool and failed to parse: tell the model how."""
        feedback = f"Your tool call could not be used: {error}. {fallback.expected_format_hint()}"
        state.messages.append({"role": "user", "content": feedback})
        signature = "<unparsed tool call>" + error
        return self._count_failure(state, "tool call", signature)

    # --- executing requests -------------------------------------------------------------

    def _dispatch(self, state: LoopState, request: ToolRequest) -> OperatorResponse | None:
        self.on_event(ev.ToolStarted(request, state.iterations_used))
        try:
            output = self.executor.run(request.name, request.arguments)
        except NeedsApproval as needed:
            return self._pause(state, request, needed.change)
        except Exception as err:
            return self._record_failure(state, request, err)
        self._record_success(state, request, output)
        return None

    def _prepare(self, state: LoopState, request: ToolRequest) -> OperatorResponse | None:
        self.on_event(ev.ToolStarted(request, state.iterations_used))
        refusal = self._refusal(state, request.name, request.arguments)
        if refusal is not None:
            return self._record_failure(state, request, ToolError(refusal))
        try:
            change = self.executor.prepare(request.name, request.arguments)
        except Exception as err:
            return self._record_failure(state, request, err)
        return self._pause(state, request, change)

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
        if status != "rejected" and self._owes_check(state, request.name):
            result += (
                f"\nBefore you answer, run {min(self._check_tools)} to check the code as it is now."
            )
        self._answer_call(state, request, result, ok=status == "done")
        event = self._event(
            state, request, status, output=output, error=error, preview=preview, exit_code=exit_code
        )
        state.events.append(event)
        self.on_event(ev.ToolFinished(event))

    def _answer_call(
        self, state: LoopState, request: ToolRequest, result: str, *, ok: bool
    ) -> None:
        self._append_result(state, request, result, ok=ok)
        state.batch_done[request.signature] = (ok, result)

    def _count_failure(
        self, state: LoopState, name: str, signature: str
    ) -> OperatorResponse | None:
        if signature == state.streak_signature:
            state.streak_count += 1
        else:
            state.streak_signature, state.streak_count = signature, 1
        if state.streak_count >= BREAKER_THRESHOLD:
            return self._failure(state, breaker_message(name, state.streak_count), "CircuitBreaker")
        repeats = self._failures_since_success(state, signature)
        if repeats >= BREAKER_THRESHOLD:
            # Two failing calls taking turns (a change that changes nothing, then a check that
            # fails, then the same change) never make a streak, and nothing succeeds between
            # them: each answer will be the same.
            return self._failure(state, repeat_message(name, repeats), "CircuitBreaker")
        return None

    def _failures_since_success(self, state: LoopState, signature: str) -> int:
        """How often the model's call ``signature`` failed since its last call that worked."""
        count = 0
        for event in reversed(state.events):
            if event.source == AUTO:
                continue
            if event.status == "done":
                break
            if event.status in ("failed", "denied"):
                count += tool_request(event.name, event.arguments).signature == signature
        return count

    def _append_result(
        self, state: LoopState, request: ToolRequest, content: str, *, ok: bool
    ) -> None:
        # A call the model wrote as text is answered as text, also on a native model: a
        # ``tool`` message that answers no ``tool_calls`` entry is refused by OpenAI-style servers.
        if request.source in _TEXT_SOURCES:
            text = fallback.format_tool_result(request.name, content, ok=ok)
            state.messages.append({"role": "user", "content": text})
            return
        message: Message = {"role": "tool", "content": content, "tool_name": request.name}
        if request.call_id:
            message["tool_call_id"] = request.call_id
        state.messages.append(message)

    def _event(
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

    def _switch_to_fallback(self, state: LoopState, reason: str) -> None:
        state.protocol = TEXT_FALLBACK
        warning = f"{reason}; switched to the text-fallback tool protocol"
        self._note(state, warning)
        self._inject_fallback_prompt(state)

    def _inject_fallback_prompt(self, state: LoopState) -> None:
        self._inject_prompt(state, fallback.fallback_prompt(self.executor.specs()), TEXT_FALLBACK)

    def _inject_prompt(self, state: LoopState, prompt: str, protocol: str) -> None:
        """The runtime-owned protocol prompt, after the caller's system messages and before
        the conversation: a stable prefix for the prompt cache."""
        state.messages.insert(leading_system(state.messages), {"role": "system", "content": prompt})
        self.on_event(ev.FallbackPromptInjected(self.model, prompt, protocol))

    # --- the auto check -----------------------------------------------------------------

    def _auto(self, state: LoopState) -> AutoCheck | None:
        """The check the loop runs itself for the request that opened this run, if any."""
        if self._auto_checks is None or state.opening is None:
            return None
        request = str(state.messages[state.opening].get("content") or "")
        if request not in self._auto_by_request:
            self._auto_by_request[request] = self._auto_checks(request)
        return self._auto_by_request[request]

    def _refusal(self, state: LoopState, name: str, arguments: Mapping[str, Any]) -> str | None:
        """Why the auto check forbids the change ``name(arguments)``, or None."""
        auto = self._auto(state)
        if auto is None or auto.refusal is None or not self.executor.is_mutating(name):
            return None
        return auto.refusal(arguments)

    def _started_with_tests(self, state: LoopState) -> bool:
        return any(e.source == AUTO and e.iteration == 0 for e in state.events)

    def _check_changes(self, state: LoopState) -> OperatorResponse | None:
        """After the calls of a turn: when a change was applied since the auto check last
        ran, run it again; a run whose check failed at the start ends when it passes."""
        auto = self._auto(state)
        if auto is None or not self._started_with_tests(state):
            return None
        last_check = max((n for n, e in enumerate(state.events) if e.source == AUTO), default=-1)
        changed = [
            e
            for e in state.events[last_check + 1 :]
            if e.status == "done" and self.executor.is_mutating(e.name)
        ]
        if not changed:
            return None
        passed = self._run_auto(state, auto, after_change=True)
        first = next((e for e in state.events if e.source == AUTO), None)
        if not passed or first is None or first.status == "done":
            return None
        return self._finished(state, self._fixed_summary(state, auto))

    def _run_auto(self, state: LoopState, auto: AutoCheck, *, after_change: bool) -> bool:
        """Run the auto check as a call of the loop's own: its event is sent and recorded, and
        the model reads its result. Whether it passed. Before the first model call, a run
        that could not run the tests at all (none found, no runner for them) is only said to
        the user, and the loop goes on without them (:meth:`_started_with_tests`)."""
        request = tool_request(auto.tool, auto.arguments, None, AUTO)
        try:
            output, error = self.executor.run(request.name, request.arguments), None
        except TestsNotRun as err:
            if not after_change:
                self._note(state, f"Rune could not run {auto.what} itself: {err}")
                return False
            output, error = None, str(err)
        except Exception as err:
            output, error = None, str(err) if isinstance(err, RuneError) else repr(err)
        passed = error is None
        # (sent once the result is known: a start that ran no test shows no tool line)
        self.on_event(ev.ToolStarted(request, state.iterations_used))
        event = self._event(
            state, request, "done" if passed else "failed", output=output, error=error
        )
        state.events.append(event)
        self.on_event(ev.ToolFinished(event))
        when = "after your change" if after_change else "before you start"
        state.messages.append(
            {"role": "user", "content": f"Rune ran {auto.what} {when}:\n{output or error}"}
        )
        return passed

    def _fixed_summary(self, state: LoopState, auto: AutoCheck) -> str:
        """The answer Rune writes when the tests that failed pass after the model's change."""
        files: list[str] = []
        for event in state.events:
            path = event.arguments.get("path") if event.status == "done" else None
            mutating = self.executor.is_mutating(event.name)
            if mutating and isinstance(path, str) and path not in files:
                files.append(path)
        last = state.events[-1]
        changed = f" after the change to {', '.join(files)}" if files else ""
        return f"Fixed: {auto.what} failed before and pass now{changed} ({last.output})."

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
        self.on_event(ev.ApprovalRequired(pending.approval))
        waiting = self._event(state, request, "pending_approval", preview=change.preview)
        try:
            sealed = pending.sealed(self._key())
        except RuneError as err:
            return self._failure(state, f"cannot seal the approval: {err}", err.kind)
        return self._respond(
            state,
            success=False,
            events=(*state.events, waiting),
            pending=pending.approval,
            _pending_json=sealed.dumps(),
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

    # --- responses ----------------------------------------------------------------------

    def _respond(self, state: LoopState, **outcome: Any) -> OperatorResponse:
        """A response that carries the loop's state: budget, history, events, warnings."""
        outcome.setdefault("events", tuple(state.events))
        return OperatorResponse(
            iterations_used=state.iterations_used,
            iteration_budget=self.max_iterations,
            messages=tuple(state.messages),
            thinking=state.thinking,
            protocol=state.protocol,
            warnings=tuple(state.warnings),
            evicted=tuple(state.evicted),
            **outcome,
        )

    def _answer(
        self, state: LoopState, text: str, done_reason: str | None = None
    ) -> OperatorResponse | None:
        """The model's final answer ends the run, except once: an answer right after a change,
        a command or a check that failed (small models give up and say "done") is sent back
        to the model. Whether it finished the task is :mod:`rune.outcome`'s rule."""
        found = outcome.problems(state.events, self._kinds)
        # A rejection is the operator's word, which the model has already read: no reminder.
        if found and not state.nudged and found[-1].reminds:
            state.nudged = True
            state.messages.append({"role": "user", "content": found[-1].reminder()})
            return None
        return self._finished(state, text, cut_off=done_reason == "length")

    def _finished(self, state: LoopState, text: str, *, cut_off: bool = False) -> OperatorResponse:
        """The run's end with ``text`` as its answer (the model's, or Rune's when the tests
        it ran pass), unfinished as :mod:`rune.outcome` finds it."""
        reason = outcome.incomplete_reason(outcome.problems(state.events, self._kinds))
        if cut_off:
            # The reply stopped at the output cap: what came is not the whole answer.
            reason = outcome.CUT_OFF if reason is None else f"{reason}; {outcome.CUT_OFF}"
        return self._respond(
            state,
            success=True,
            text=text,
            incomplete=reason,
            changed=outcome.changed(state.events, self._kinds),
        )

    def _failure(self, state: LoopState, error: str, kind: str) -> OperatorResponse:
        return self._respond(state, success=False, error=error, error_kind=kind)

    def _failure_before_loop(self, err: RuneError) -> OperatorResponse:
        return OperatorResponse(
            success=False,
            error=str(err),
            error_kind=err.kind,
            iterations_used=0,
            iteration_budget=self.max_iterations,
        )


def _constrained_request(turn: constrained.ConstrainedTurn) -> ToolRequest:
    assert turn.call is not None
    return tool_request(turn.call.name, turn.call.arguments, None, "constrained")


def _text_requests(parsed: fallback.ParseOutcome) -> list[ToolRequest]:
    return [tool_request(c.name, c.arguments, None, "text-fallback") for c in parsed.calls]


def _transport_failure(err: Exception) -> RuneError:
    """A non-Rune exception from the transport, as the typed failure it ends the run with: its
    ``kind`` (the response's ``error_kind``) is the exception's class name."""
    failure = _ForeignFailure(f"the model transport failed: {type(err).__name__}: {err}"[:2000])
    failure.foreign_kind = type(err).__name__
    return failure


class _ForeignFailure(RuneError):
    foreign_kind = "Exception"

    @property
    def kind(self) -> str:
        return self.foreign_kind
