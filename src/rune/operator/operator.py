"""``RuneOperator``: a conversation of many user turns over ``LocalToolRuntime``.

Each :meth:`RuneOperator.send` is one user turn with its own iteration budget. The system
context is assembled from contributors once per turn (:mod:`rune.operator.blocks`) and fitted
into the model's window by :class:`rune.operator.budget.ContextBudget`; within a turn the
prompt only grows at its end, so the server's prompt cache serves the prefix.

With a session, everything is journaled as it happens: the operator writes the user message
before the model is called, each decision and each grant; the journal listens to the rest
(:class:`rune.sessions.sink.JournalSink`, sent every event before anyone else): the loop's
messages before every model call and when a run returns, each tool event as it finishes, the
pause with its state, the turn's end. After a crash, :meth:`RuneOperator.resume` continues from
the journal's fold (:mod:`rune.sessions.fold`): a waiting approval is shown again, a journaled
decision is carried out, and an interrupted turn redoes only the model call that had not been
journaled (the resumed part of that turn gets a fresh iteration budget).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypedDict, Unpack

from rune import events as ev
from rune.errors import ApprovalError, ConfigError, InvalidPendingState, RuneError
from rune.grants import Grant
from rune.limits import MAX_BUDGETS, MAX_ITERATIONS
from rune.messages import (
    ChatResult,
    Message,
    OperatorResponse,
    PendingApproval,
    ToolEvent,
    thaw,
)
from rune.operator.blocks import (
    ContextBlock,
    Workspace,
    environment_block,
    files_block,
    project_block,
    system_block,
    tools_block,
)
from rune.operator.budget import ContextBudget, split_system
from rune.operator.repo_map import map_block
from rune.pause.state import PendingState
from rune.runtime.assist import Assist
from rune.runtime.local_tool_runtime import LocalToolRuntime, ShapedRequest
from rune.sessions import records
from rune.sessions.sink import JournalSink
from rune.sessions.store import Session
from rune.tools.spec import AutoChecks, Executor
from rune.transport.base import Transport

Contributor = Callable[[], ContextBlock | None]


class Settings(TypedDict, total=False):
    """What :meth:`RuneOperator.from_session` passes on (see ``RuneOperator``)."""

    max_iterations: int
    max_context: int | None
    reserve_output_tokens: int
    system_prompt: str | None
    think: bool | None
    options: Mapping[str, object] | None
    on_event: ev.EventSink | None
    protocol: str
    auto_checks: AutoChecks | None
    max_budgets: int
    assists: Sequence[Assist] | None
    workspace: Workspace | None


class _Shaper:
    """The runtime's shaper: the budget fits the request, and what it evicts is said."""

    def __init__(self, operator: RuneOperator) -> None:
        self._operator = operator

    def shape(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, object]] = (),
    ) -> ShapedRequest:
        shaped = self._operator.budget.shape(model, messages, tools)
        for item in shaped.evicted:
            self._operator.on_event(ev.Warning(f"evicted to fit the context window: {item}"))
        return shaped

    def observe(self, shaped: ShapedRequest, result: ChatResult) -> None:
        self._operator.budget.observe(shaped, result)


class RuneOperator:
    """Drives a conversation: ``send`` a user turn, ``approve``/``reject`` a pause."""

    def __init__(
        self,
        transport: Transport,
        executor: Executor,
        *,
        model: str,
        max_iterations: int = MAX_ITERATIONS,
        session: Session | None = None,
        max_context: int | None = None,
        reserve_output_tokens: int = 1024,
        system_prompt: str | None = None,
        think: bool | None = None,
        options: Mapping[str, object] | None = None,
        on_event: ev.EventSink | None = None,
        protocol: str = "auto",
        auto_checks: AutoChecks | None = None,
        max_budgets: int = 1,
        assists: Sequence[Assist] | None = None,
        workspace: Workspace | None = None,
    ) -> None:
        if not 1 <= max_budgets <= MAX_BUDGETS:
            raise ConfigError(f"max_budgets must be between 1 and {MAX_BUDGETS}, got {max_budgets}")
        self.max_budgets = max_budgets
        #: the budgets of turns the current user turn has started (see _renewed)
        self._budgets = 1
        self.transport = transport
        self.executor = executor
        #: what the workspace's context blocks describe (by default, where ``executor`` is
        #: confined; None: no workspace blocks)
        self.workspace = workspace if workspace is not None else Workspace.of(executor)
        self.model = model
        self.protocol = protocol
        self.system_prompt = system_prompt
        self.on_event: ev.EventSink = on_event or ev.ignore
        self.budget = ContextBudget(
            transport,
            max_context=max_context,
            reserve_output_tokens=reserve_output_tokens,
            tools=[spec.schema() for spec in executor.specs()],
            options=options,
        )
        self._runtime = LocalToolRuntime(
            transport,
            executor,
            model=model,
            max_iterations=max_iterations,
            think=think,
            shaper=_Shaper(self),
            on_event=self._emit,
            protocol=protocol,
            auto_checks=auto_checks,
            assists=assists,
        )
        self.contributors: list[Contributor] = [
            self._contributor_system,
            self._contributor_tools,
            self._contributor_environment,
            self._contributor_files,
            self._contributor_map,
            self._contributor_project,
        ]
        self.session: Session | None = None
        self._history: list[Message] = []
        self._turn_starts: list[int] = []
        #: the tool events of the current user turn, over its budgets and resumptions: how the
        #: turn ends counts them all (``LoopState.earlier``)
        self._turn_events: list[ToolEvent] = []
        self._journal: JournalSink | None = None
        self._turn_blocks: tuple[ContextBlock, ...] | None = None
        self._pending_state: PendingState | None = None
        #: why the last turn's answer left the task unfinished (``--continue`` goes on from it)
        self._unfinished: str | None = None
        #: what the person allowed for the rest of the session (journaled, read back on resume)
        self.grants: list[Grant] = []
        if session is not None:
            self._attach(session)

    @classmethod
    def from_session(
        cls,
        transport: Transport,
        executor: Executor,
        session: Session,
        *,
        model: str | None = None,
        **settings: Unpack[Settings],
    ) -> RuneOperator:
        """An operator rebuilt from a session journal (model from its header unless given)."""
        model = model if model is not None else session.state.header.model
        return cls(transport, executor, model=model, session=session, **settings)

    # --- state --------------------------------------------------------------------------

    @property
    def pending(self) -> PendingApproval | None:
        return None if self._pending_state is None else self._pending_state.approval

    @property
    def history(self) -> list[Message]:
        """The conversation so far, without the system context (plain dicts, copies)."""
        return [thaw(m) for m in self._history]

    @property
    def turn_starts(self) -> list[int]:
        """Where each user turn starts in :attr:`history` (later user messages may be tool
        results fed back as text)."""
        return list(self._turn_starts)

    # --- contributors -------------------------------------------------------------------

    def context_blocks(self) -> list[ContextBlock]:
        return [block for contributor in self.contributors if (block := contributor()) is not None]

    def _contributor_system(self) -> ContextBlock:
        return system_block(self.system_prompt)

    def _contributor_tools(self) -> ContextBlock:
        return tools_block(
            self.executor.specs(), described_below=self.protocol in ("constrained", "blocks")
        )

    def _contributor_environment(self) -> ContextBlock | None:
        if self.workspace is None:
            return None
        return environment_block(
            self.workspace.root,
            self.workspace.policy,
            self.executor.specs(),
            commands_contained=self.workspace.commands_contained,
        )

    def _opening_request(self) -> str:
        """The request that opened this turn (later user messages may be tool results)."""
        start = self._turn_starts[-1] if self._turn_starts else None
        opening = self._history[start] if start is not None and start < len(self._history) else {}
        return str(opening.get("content") or "")

    def _contributor_files(self) -> ContextBlock | None:
        if self.workspace is None:
            return None
        return files_block(self.workspace.root, self.workspace.policy, self._opening_request())

    def _contributor_map(self) -> ContextBlock | None:
        if self.workspace is None:
            return None
        return map_block(self.workspace.root, self.workspace.policy, self._opening_request())

    def _contributor_project(self) -> ContextBlock | None:
        if self.workspace is None:
            return None
        found = project_block(self.workspace.root, self.workspace.policy)
        for warning in found.warnings:
            self.on_event(ev.Warning(warning))
        return found.block

    # --- the conversation ---------------------------------------------------------------

    def send(self, text: str) -> OperatorResponse:
        """One user turn: the loop runs until the model answers, pauses, or must stop."""
        if self._pending_state is not None:
            raise ApprovalError(
                "a change is waiting for approval; approve() or reject() it before sending "
                "a new message"
            )
        message: Message = {"role": "user", "content": str(text)}
        self._turn_starts.append(len(self._history))
        self._turn_events = []
        self._history.append(message)
        self._record(records.UserTurn(message))
        self._turn_blocks = tuple(self.context_blocks())
        self._budgets = 1
        return self._drive(lambda runtime: runtime.run(self._history, earlier=self._turn_events))

    def approve(self) -> OperatorResponse:
        """Apply the change the turn waits on (re-validated by the executor), then go on."""
        state = self._take_pending()
        self._record(records.Decided("approved"))
        return self._drive(lambda runtime: runtime.approve(state))

    def allow(self, grant: Grant) -> None:
        """Allow what ``grant`` covers for the rest of the session (journaled first)."""
        if grant not in self.grants:
            self._record(records.Granted(grant))
            self.grants.append(grant)

    def granted(self, pending: PendingApproval) -> Grant | None:
        """The grant that answers ``pending`` without asking, if any."""
        return next((grant for grant in self.grants if grant.covers(pending)), None)

    def reject(self, reason: str = "") -> OperatorResponse:
        """Refuse the change the turn waits on; the model hears ``reason`` and goes on."""
        state = self._take_pending()
        self._record(records.Decided("rejected", reason))
        return self._drive(lambda runtime: runtime.reject(state, reason))

    def resume(self, session: Session | None = None) -> OperatorResponse | None:
        """Pick up where the journal left off (attaching ``session`` first when given).

        Returns the paused response when an approval waits (same preview, same binding),
        the result of finishing an interrupted turn, or None when the last turn had ended.
        """
        if session is not None:
            self._attach(session)
        if self.session is None:
            return None
        if self._pending_state is not None:
            return self._paused_response()
        folded = self.session.state
        if folded.last is None or isinstance(folded.last, records.TurnEnded):
            return None
        if isinstance(folded.last, records.Decided) and not folded.messages_since:
            # The pause this decision answers (an approval asked again adds a second decision).
            pause = folded.answered
            if pause is None:
                return None
            saved = pause.state
            if folded.last.decision == "approved":
                # Interrupted after the approval: the change may have been applied or not. Ask
                # again rather than replay it (a file change re-applies as a no-op; a command
                # would run twice).
                self._pending_state = PendingState.from_json(saved)
                self.on_event(
                    ev.Warning(
                        "Rune stopped after this change was approved; it may have been applied "
                        "already. Approve it again to make sure, or reject it."
                    )
                )
                return self._paused_response()
            reason = folded.last.reason
            # As journaled: a damaged state is the runtime's typed failure, not an exception.
            return self._drive(lambda runtime: runtime.reject(saved, reason))
        if (
            self._history
            and self._history[-1].get("role") == "assistant"
            and not (self._history[-1].get("tool_calls"))
        ):
            # The answer was journaled; only the end-of-turn record was not.
            answer = OperatorResponse(
                success=True,
                text=str(self._history[-1].get("content") or ""),
                messages=tuple(self._history),
            )
            self._emit(ev.TurnEnded(answer))
            return answer
        return self._drive(lambda runtime: runtime.run(self._history, earlier=self._turn_events))

    def retry(self) -> OperatorResponse | None:
        """Run the last turn again from its last journaled point, with a fresh budget: after
        a failure (a server error, a timeout), an interruption, or a stop; after an answer
        that left the task unfinished, tell the model why and let it go on. A waiting approval
        is shown again instead; None when the conversation has no turn yet, or its last turn
        ended with an answer that finished it."""
        if self._pending_state is not None:
            return self._paused_response()
        if not self._turn_starts:
            return None
        last = self._history[-1] if self._history else {}
        if last.get("role") == "assistant" and not last.get("tool_calls"):
            if self._unfinished is None:
                return None  # the turn ended with an answer: there is nothing to run again
            return self.send(continue_note(self._unfinished))
        return self._drive(lambda runtime: runtime.run(self._history, earlier=self._turn_events))

    def reload(self) -> None:
        """Take the conversation as the journal has it, after a call was interrupted (Ctrl-C,
        Esc): the loop's last checkpoint is kept, what it had not journaled is dropped."""
        if self.session is not None:
            self._attach(self.session)

    # --- internals ----------------------------------------------------------------------

    def _attach(self, session: Session) -> None:
        self.session = session
        self._journal = JournalSink(session)
        folded = session.state
        self._history = [dict(m) for m in folded.messages]
        self._turn_starts = list(folded.turn_starts)
        self._turn_events = session.turn_events
        self._turn_blocks = None
        self._unfinished = _optional_text(folded.ended.incomplete) if folded.ended else None
        self.grants = list(folded.grants)
        if folded.waiting is not None:
            self._pending_state = PendingState.from_json(folded.waiting.state)
            # A journal written by an older Rune has the pause before its messages, one by one:
            # a crash in between left them only in the pause. Journal them now, so the history
            # is whole again.
            _, conversation = split_system([thaw(m) for m in self._pending_state.messages])
            for message in conversation[len(self._history) :]:
                self._record(records.MessageAdded(message))
            self._history = conversation
        else:
            self._pending_state = None

    def _take_pending(self) -> PendingState:
        if self._pending_state is None:
            raise InvalidPendingState("nothing is waiting for approval")
        state = self._pending_state
        self._pending_state = None
        return state

    def _record(self, body: records.JournalRecord) -> None:
        if self._journal is not None:
            self._journal.write(body)

    def _emit(self, event: ev.LoopEvent) -> None:
        """Journal ``event`` first, then tell whoever listens."""
        if self._journal is not None:
            self._journal(event)
        if isinstance(event, ev.ToolFinished):
            self._turn_events.append(event.event)
        self.on_event(event)

    def _drive(self, step: Callable[[LocalToolRuntime], OperatorResponse]) -> OperatorResponse:
        if self._turn_blocks is None:
            self._turn_blocks = tuple(self.context_blocks())
        self.budget.start_turn(self._turn_blocks, self._turn_starts)
        try:
            response = step(self._runtime)
            while self._renewed(response):
                self._take_messages(response)
                start = self._turn_starts[-1] if self._turn_starts else None
                response = self._runtime.run(
                    self._history, opening=start, earlier=self._turn_events
                )
        except (RuneError, BrokenPipeError):
            raise  # (a closed pipe: the reader of the output went away, rune exits 141)
        except Exception as err:
            # The runtime turns every failure it knows into a response; anything else is a bug,
            # and still ends the turn as a typed failure, journaled, never a traceback.
            response = OperatorResponse(
                success=False,
                error=f"internal error: {type(err).__name__}: {err}"[:2000],
                error_kind=type(err).__name__,
                iteration_budget=self._runtime.max_iterations,
                messages=tuple(self._history),
            )
        self._take_messages(response)
        if isinstance(response.pause, PendingState) and response.pending is not None:
            self._emit(ev.TurnPaused(response))
            self._pending_state = response.pause
        if not response.paused:
            self._emit(ev.TurnEnded(response))
            self._turn_blocks = None
            self._unfinished = response.incomplete
        return response

    def _take_messages(self, response: OperatorResponse) -> None:
        """The conversation as the loop left it (journaled as it went)."""
        if response.messages:
            _, self._history = split_system([thaw(m) for m in response.messages])

    def _renewed(self, response: OperatorResponse) -> bool:
        """Whether the turn goes on with a fresh budget: this one ran out after it made a
        change (a model that changes nothing gets no more turns), and budgets are left."""
        if response.error_kind != "IterationLimit" or self._budgets >= self.max_budgets:
            return False
        changed = any(
            e.status == "done" and self.executor.is_mutating(e.name) for e in response.events
        )
        if not changed:
            return False
        self._budgets += 1
        self.on_event(ev.BudgetRenewed(self._budgets, self.max_budgets))
        return True

    def _paused_response(self) -> OperatorResponse:
        state = self._pending_state
        assert state is not None
        return OperatorResponse(
            success=False,
            iterations_used=state.iterations_used,
            iteration_budget=state.iteration_budget,
            pending=state.approval,
            messages=tuple(self._history),
            evicted=state.evicted,
            pause=state,
        )


def continue_note(unfinished: str) -> str:
    """What the model is told when the user asks it to go on after an unfinished answer."""
    return (
        f"The task is not finished: {unfinished}. Go on with it: fix what is left, check it, "
        "then answer."
    )


def _optional_text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
