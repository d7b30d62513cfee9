"""``rune tui``: the transcript, the budget, and approvals, in Textual.

The agent comes in fully built (:class:`rune.app.Rune`); the app only drives its operator.
Every operator call runs in a thread worker so the screen never freezes; the loop's events
reach the UI as Textual messages (``post_message`` is safe from any thread).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.suggester import SuggestFromList
from textual.widgets import Footer, Input, Static

from rune import events as ev
from rune.app import Rune
from rune.errors import CallCancelled, RuneError
from rune.frontend.approvals import answered, carry_out
from rune.frontend.kept import kept_changes
from rune.frontend.view import Decision, diff_text, elapsed, outcome_text
from rune.messages import OperatorResponse, PendingApproval
from rune.stop import stoppable
from rune.text import plural, visible
from rune.tui import slash
from rune.tui.approval import ApprovalScreen
from rune.tui.widgets import StreamedText, Thinking, ToolLine

Operation = Callable[[], OperatorResponse | None]


class LoopEventMessage(Message):
    def __init__(self, event: ev.LoopEvent) -> None:
        super().__init__()
        self.event = event


class ResponseMessage(Message):
    """What an operator call returned (None: nothing to resume), or the error it raised, or
    that the user stopped it (``stopped``)."""

    def __init__(
        self, response: OperatorResponse | None, error: str | None = None, *, stopped: bool = False
    ) -> None:
        super().__init__()
        self.response = response
        self.error = error
        self.stopped = stopped


class Prompt(Input):
    """The task box, with the tasks sent before on up and down."""

    BINDINGS = [  # noqa: RUF012 - Textual reads this class attribute
        Binding("up", "older", "earlier task", show=False),
        Binding("down", "newer", "later task", show=False),
    ]

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.sent: list[str] = []
        self.back = 0  # how far back in ``sent`` the box shows (0: what is being typed)
        self.draft = ""

    def remember(self, text: str) -> None:
        if not self.sent or self.sent[-1] != text:
            self.sent.append(text)
        self.back = 0

    def action_older(self) -> None:
        if self.back < len(self.sent):
            if self.back == 0:
                self.draft = self.value
            self.back += 1
            self._show(self.sent[-self.back])

    def action_newer(self) -> None:
        if self.back > 0:
            self.back -= 1
            self._show(self.sent[-self.back] if self.back else self.draft)

    def _show(self, text: str) -> None:
        self.value = text
        self.cursor_position = len(text)


class RuneApp(App[int]):
    """Drive ``rune.operator``; show what it does; ask before anything changes."""

    TITLE = "rune"
    CSS_PATH = "rune.tcss"
    BINDINGS = [  # noqa: RUF012 - Textual reads this class attribute
        Binding("ctrl+t", "toggle_thinking", "thinking"),
        Binding("ctrl+o", "toggle_output", "tool output"),
        Binding("ctrl+r", "review", "pending approval"),
        Binding("escape", "stop", "stop"),
        Binding("ctrl+c", "interrupt", "stop", show=False, priority=True),
        Binding("ctrl+g", "continue", "continue"),
        Binding("ctrl+q", "quit_now", "quit", priority=True),
    ]

    step: reactive[str] = reactive("step 0/0", init=False)
    busy: reactive[bool] = reactive(False, init=False)

    def __init__(self, rune: Rune, *, task: str | None = None) -> None:
        super().__init__()
        self.rune = rune
        self.initial_task = task
        self.set_reactive(RuneApp.step, f"step 0/{rune.budget}")
        self.pending: PendingApproval | None = None
        self._text: StreamedText | None = None
        self._thinking: Thinking | None = None
        self._tools: list[ToolLine] = []
        self._resuming = False
        #: the last run ended where a fresh budget may go on (iteration limit, failure, stop)
        self.can_continue = False
        self.last_call = ""  # "step 2/8: 1.4 s, 37 tokens"
        #: the diffs of the changes applied while the app ran (``/diff``)
        self.applied: list[str] = []
        self.undone = False
        #: what to print once the app has exited (the session kept, how to resume it)
        self.farewell = ""
        #: set to stop what the operator call running now runs (a new one per call)
        self._stop_flag = threading.Event()
        self._header_line = Static(self._header(), id="header", markup=False)

    def compose(self) -> ComposeResult:
        yield self._header_line
        yield VerticalScroll(id="transcript")
        yield Prompt(
            placeholder="what should Rune do? (Enter to send; /help for commands)",
            id="prompt",
            suggester=SuggestFromList(slash.COMMANDS, case_sensitive=False),
        )
        yield Footer()

    def _header(self) -> str:
        caps = self.rune.capabilities
        if self.busy:
            # (esc stops it: the footer says so)
            state = "working"
            watch = getattr(self.rune.transport, "progress", None)
            call = watch() if callable(watch) else None
            if call is not None:
                spent = f"{elapsed(call.seconds)}, {plural(call.tokens, 'token')}"
                state = f"waiting for the model {spent}"
        else:
            state = "waiting for approval" if self.pending else "idle"
        model = self.rune.model if len(self.rune.model) <= 28 else self.rune.model[:27] + "…"
        workspace = Path(self.rune.settings.workspace).name or "/"
        parts = [
            ("rune", True),
            (model, True),
            (self.step, True),
            (state, True),
            (f"last {self.last_call}", False) if self.last_call and not self.busy else ("", False),
            (f"in {workspace}", False),
            (f"session {self.rune.session_id}", False),
            ("tools" if caps.tools else "text protocol", False),
            (f"ctx {caps.context_length or '?'}", False),
        ]
        # The header has one line, padded by one column each side.
        width = (self.size.width or 120) - 2
        return slash.fit([(text, needed) for text, needed in parts if text], width)

    def on_resize(self) -> None:
        self._refresh_header()

    def _refresh_header(self) -> None:
        # The header's own flag: before compose there is nothing to update (`App.is_mounted` is a
        # method, so testing it on the app is always true).
        if self._header_line.is_mounted:
            self._header_line.update(self._header())

    def watch_step(self) -> None:
        self._refresh_header()

    def watch_busy(self) -> None:
        self._refresh_header()

    def on_mount(self) -> None:
        self.rune.relay.target = self._relay
        self.set_interval(0.5, self._tick)
        self._replay_history()
        warnings = getattr(self.rune, "startup_warnings", None)
        for note in warnings() if callable(warnings) else ():
            self._note(f"warning: {note}", "warning")
        # Whatever the journal left open comes first: a waiting approval, an interrupted turn.
        self._resuming = True
        self._call(self.rune.operator.resume)
        self.query_one("#prompt", Input).focus()

    def _relay(self, event: ev.LoopEvent) -> None:
        """The loop's events, from the worker thread to the UI (``post_message`` is safe)."""
        self.post_message(LoopEventMessage(event))

    def _replay_history(self) -> None:
        """Show a reopened session's conversation as plain lines."""
        history = getattr(self.rune.operator, "history", [])
        for message in history:
            content = str(message.get("content") or "").strip()
            if message.get("role") == "user" and content:
                self._mount(Static(f"> {visible(content)}", markup=False, classes="user"))
            elif message.get("role") == "assistant" and content:
                self._mount(Static(visible(content), markup=False, classes="assistant"))
        if history:
            self._note("(earlier in this session)")

    # --- transcript -------------------------------------------------------------------------

    def _mount(self, widget: Any) -> None:
        transcript = self.query_one("#transcript", VerticalScroll)
        transcript.mount(widget)
        transcript.scroll_end(animate=False)

    def _note(self, text: str, classes: str = "note") -> None:
        self._mount(Static(visible(text), markup=False, classes=classes))

    def on_loop_event_message(self, message: LoopEventMessage) -> None:
        match message.event:
            case ev.IterationStarted(iteration=n, budget=budget):
                self.step = f"step {n}/{budget}"
                self._text = self._thinking = None
            case ev.TextDelta(text=text):
                if self._text is None:
                    self._text = StreamedText(classes="assistant")
                    self._mount(self._text)
                self._text.append(text)
            case ev.ThinkingDelta(text=text):
                if self._thinking is None:
                    self._thinking = Thinking()
                    self._mount(self._thinking)
                self._thinking.append(text)
            case ev.ToolStarted(request=request):
                line = ToolLine(request, self.step)
                self._tools.append(line)
                self._mount(line)
                self._text = None
            case ev.ToolFinished(event=event):
                if event.status == "done" and event.preview and not event.preview.startswith("$"):
                    self.applied.append(event.preview)
                running = [t for t in self._tools if t.status in ("running", "pending_approval")]
                if running:
                    running[0].finish(event)
            case ev.ApprovalRequired():
                waiting = [t for t in self._tools if t.status == "running"]
                if waiting:
                    waiting[-1].waiting()
            case ev.ModelCallFinished(seconds=seconds, tokens=tokens):
                self.last_call = f"{self.step}: {elapsed(seconds)}, {plural(tokens, 'token')}"
                self._refresh_header()
            case ev.FallbackPromptInjected() as injected:
                self._note(injected.describe())
            case ev.Warning(message=text):
                self._note(f"warning: {text}", "warning")

    # --- driving the operator -------------------------------------------------------------

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        command = slash.parse(text)
        if command is not None:
            event.input.value = ""
            if isinstance(event.input, Prompt):
                event.input.remember(text)
            self._slash(command)
            return
        text = slash.task_text(text)
        if self.busy:
            self._note("Rune is still working: esc stops the model call; your text stays here.")
            return
        if self.pending is not None:
            self._note("A change waits for your answer first: ctrl+r shows it.")
            return
        event.input.value = ""
        if isinstance(event.input, Prompt):
            event.input.remember(text)
        self._start(text)

    def _start(self, text: str) -> None:
        self._mount(Static(f"> {visible(text)}", markup=False, classes="user"))
        self._call(lambda: self.rune.operator.send(text))

    def _call(self, operation: Operation) -> None:
        self.busy = True
        self._stop_flag = threading.Event()
        self._run_operation(operation)

    @work(thread=True, exclusive=True, group="operator")
    def _run_operation(self, operation: Operation) -> None:
        try:
            # Esc sets the flag: a command this call runs dies with all it started.
            with stoppable(self._stop_flag):
                response = operation()
        except CallCancelled:
            # The journal holds the turn up to its last checkpoint: take it from there.
            self.rune.operator.reload()
            self.post_message(ResponseMessage(None, stopped=True))
        except RuneError as err:
            self.post_message(ResponseMessage(None, f"{err.kind}: {err}"))
        else:
            self.post_message(ResponseMessage(response))

    def on_response_message(self, message: ResponseMessage) -> None:
        self.busy = False
        resuming, self._resuming = self._resuming, False
        response = message.response
        if message.stopped:
            self.rune.transport.allow()
            self.can_continue = True
            self._note("stopped; ctrl+g goes on from the last step, or send a new task")
            return
        if message.error is not None:
            self.can_continue = True
            self._note(message.error, "error")
            self._note("ctrl+g tries again from the last good point")
            return
        if response is None:
            if resuming and self.initial_task:
                self._start(self.initial_task)
            return
        if resuming and response.pending is not None:
            self._note("This session was waiting for your approval.")
        self.step = response.budget_label
        if response.pending is not None:
            self._ask(response.pending)
        elif response.success:
            if not self._text and response.text:
                self._note(response.text, "assistant")
            self.can_continue = response.outcome == "incomplete"
            self._note_kept(response)
            self._note(*outcome_text(response, "ctrl+g goes on with a fresh budget"))
        else:
            self.can_continue = True
            self._note_kept(response)
            self._note(*outcome_text(response))
            more = "a fresh budget" if response.outcome == "limit" else "another try"
            self._note(f"ctrl+g goes on with {more} from the last step")

    def _note_kept(self, response: OperatorResponse) -> None:
        """Above the outcome of a run that did not finish: the file changes it leaves."""
        kept = kept_changes(self.rune, response, cwd=Path.cwd())
        if kept is not None:
            self._note(kept, "warning")

    def _ask(self, pending: PendingApproval) -> None:
        self.pending = pending
        self._refresh_header()
        why = answered(self.rune, pending)
        if why is not None:
            self._note(f"{why}: {pending.summary}")
            self._decide(Decision(True))
            return
        self.push_screen(ApprovalScreen(pending, self.step), self._decide)

    def _decide(self, decision: Decision | None) -> None:
        if decision is None:
            self._note("Approval left for later (ctrl+r to review it).")
            self._refresh_header()
            return
        self.pending = None
        if decision.grant is not None:
            self._note(f"approved; {decision.grant.describe()} are allowed for this session")
        elif decision.approve:
            self._note("approved")
        else:
            self._note(f"rejected: {decision.reason or '(no reason)'}")
        self._call(lambda: carry_out(self.rune, decision))

    # --- slash commands -----------------------------------------------------------------------

    def _slash(self, command: slash.Slash) -> None:
        if command.error is not None:
            self._note(command.error, "error")
            return
        match command.name:
            case "/help":
                for line in slash.help_lines():
                    self._note(line)
            case "/diff":
                if not self.applied:
                    self._note("no change applied in this session yet")
                elif self.undone:
                    self._note("as applied (an /undo since took some back: `rune undo --list`)")
                for preview in self.applied:
                    self._mount(Static(diff_text(preview), classes="diff"))
            case "/model":
                caps = self.rune.capabilities
                self._note(
                    f"{self.rune.model} via {self.rune.backend.label}: "
                    f"{'native tool calls' if caps.tools else 'text protocol'}, "
                    f"{'thinking' if caps.thinking else 'no thinking'}, "
                    f"context {caps.context_length or 'unknown'}; "
                    "`rune tui --model NAME` starts with another"
                )
            case "/sessions":
                self._show_sessions()
            case "/undo":
                self._undo()
            case "/clear":
                self.query_one("#transcript", VerticalScroll).remove_children()
                self._text = self._thinking = None
                self._tools = [
                    t for t in self._tools if t.status in ("running", "pending_approval")
                ]
            case "/quit":
                self.action_quit_now()

    def _undo(self) -> None:
        """Take back the last file change of this session, on the session held open."""
        from rune.sessions.undo import undo

        session = getattr(self.rune.operator, "session", None)
        if self.busy or self.pending is not None:
            self._note("/undo waits until Rune is idle and nothing waits for approval", "error")
            return
        if session is None:
            self._note("this agent keeps no session, so there is nothing to undo", "error")
            return
        try:
            lines = undo(session, self.rune.workspace).lines()
        except RuneError as err:
            self._note(f"✗ undo refused: {err}", "error")
            return
        for line in lines:
            self._note(line)
        self.undone = True

    def _show_sessions(self, limit: int = 10) -> None:
        from rune.app import session_store

        try:
            sessions = session_store().list()
        except RuneError as err:
            self._note(f"{err.kind}: {err}", "error")
            return
        for item in sessions[:limit]:
            when = item.updated_at[:16].replace("T", " ")
            self._note(f"{item.id}  {item.status:<16}  {when}  {item.title}")
        more = len(sessions) - limit
        self._note(
            f"{plural(more, 'more session')}: `rune sessions` lists all"
            if more > 0
            else ("no sessions yet" if not sessions else "`rune resume ID` goes on with one")
        )

    # --- actions ----------------------------------------------------------------------------

    def _tick(self) -> None:
        if self.busy:
            self._refresh_header()

    def action_stop(self) -> None:
        """Esc: stop the model call in flight and any command running (its whole tree)."""
        if self.busy:
            self._stop()
            self._note("stopping…")

    def action_interrupt(self) -> None:
        """Ctrl-C: stop the model call when one runs, else quit."""
        if self.busy:
            self.action_stop()
        else:
            self.action_quit_now()

    def action_quit_now(self) -> None:
        """Quit at once: a model call in flight is abandoned, and the session stays where the
        journal has it, for ``rune resume`` (or ``rune tui --session``)."""
        session = self.rune.session_id
        if self.pending is not None:
            self.farewell = (
                f"An approval is waiting; the session {session} is kept: `rune resume {session}`"
            )
        elif self.busy:
            self.farewell = f"interrupted; the session {session} is kept: `rune resume {session}`"
        self._stop()
        self.exit(0)

    def _stop(self) -> None:
        """Stop the model call in flight and the command running, with all it started."""
        self._stop_flag.set()
        self.rune.transport.stop()

    def action_continue(self) -> None:
        """Go on from the last journaled point with a fresh budget (after a stop, a failure or
        the iteration limit)."""
        if self.busy or self.pending is not None or not self.can_continue:
            return
        self.can_continue = False
        self._note("going on with a fresh budget")
        self._call(self.rune.operator.retry)

    def action_review(self) -> None:
        if self.pending is not None and not self.busy:
            self.push_screen(ApprovalScreen(self.pending, self.step), self._decide)

    def action_toggle_thinking(self) -> None:
        for block in self.query(Thinking):
            block.collapsed = not block.collapsed

    def action_toggle_output(self) -> None:
        lines = list(self.query(ToolLine))
        expand = any(line.collapsed for line in lines)
        for line in lines:
            line.collapsed = not expand
