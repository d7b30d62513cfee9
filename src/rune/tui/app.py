"""``rune tui``: the transcript, the budget, and approvals, in Textual.

The agent comes in fully built (:class:`rune.app.Rune`); the app only drives its operator.
Every operator call runs in a thread worker so the screen never freezes; the loop's events
reach the UI as Textual messages (``post_message`` is safe from any thread).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Footer, Input, Static

from rune import events as ev
from rune.app import Rune, auto_approves
from rune.errors import RuneError
from rune.messages import OperatorResponse, PendingApproval
from rune.text import visible
from rune.tui.approval import ApprovalScreen
from rune.tui.widgets import StreamedText, Thinking, ToolLine
from rune.view import Decision

Operation = Callable[[], OperatorResponse | None]


class LoopEventMessage(Message):
    def __init__(self, event: ev.LoopEvent) -> None:
        super().__init__()
        self.event = event


class ResponseMessage(Message):
    """What an operator call returned (None: nothing to resume), or the error it raised."""

    def __init__(self, response: OperatorResponse | None, error: str | None = None) -> None:
        super().__init__()
        self.response = response
        self.error = error


class RuneApp(App[int]):
    """Drive ``rune.operator``; show what it does; ask before anything changes."""

    TITLE = "rune"
    CSS_PATH = "rune.tcss"
    BINDINGS = [  # noqa: RUF012 - Textual reads this class attribute
        Binding("ctrl+t", "toggle_thinking", "thinking"),
        Binding("ctrl+o", "toggle_output", "tool output"),
        Binding("ctrl+r", "review", "pending approval"),
        Binding("ctrl+q", "quit", "quit"),
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
        self._header_line = Static(self._header(), id="header", markup=False)

    def compose(self) -> ComposeResult:
        yield self._header_line
        yield VerticalScroll(id="transcript")
        yield Input(placeholder="what should Rune do? (Enter to send)", id="prompt")
        yield Footer()

    def _header(self) -> str:
        caps = self.rune.capabilities
        features = [
            "tools" if caps.tools else "text protocol",
            "thinking" if caps.thinking else "no thinking",
            f"ctx {caps.context_length or '?'}",
        ]
        state = "working" if self.busy else ("waiting for approval" if self.pending else "idle")
        return (
            f"rune · {self.rune.model} · {' · '.join(features)} · {self.step} · {state}"
            f" · session {self.rune.session_id}"
        )

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
                running = [t for t in self._tools if t.status == "running"]
                if running:
                    running[0].finish(event)
            case ev.FallbackPromptInjected() as injected:
                self._note(injected.describe())
            case ev.Warning(message=text):
                self._note(f"warning: {text}", "warning")
            case _:
                pass

    # --- driving the operator -------------------------------------------------------------

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text or self.busy:
            return
        event.input.value = ""
        self._start(text)

    def _start(self, text: str) -> None:
        self._mount(Static(f"> {visible(text)}", markup=False, classes="user"))
        self._call(lambda: self.rune.operator.send(text))

    def _call(self, operation: Operation) -> None:
        self.busy = True
        self._run_operation(operation)

    @work(thread=True, exclusive=True, group="operator")
    def _run_operation(self, operation: Operation) -> None:
        try:
            response = operation()
        except RuneError as err:
            self.post_message(ResponseMessage(None, f"{err.kind}: {err}"))
        else:
            self.post_message(ResponseMessage(response))

    def on_response_message(self, message: ResponseMessage) -> None:
        self.busy = False
        resuming, self._resuming = self._resuming, False
        response = message.response
        if message.error is not None:
            self._note(message.error, "error")
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
            self._note(f"✓ done ({response.budget_label})", "done")
        else:
            self._note(f"✗ {response.error_kind}: {response.error}", "error")

    def _ask(self, pending: PendingApproval) -> None:
        self.pending = pending
        self._refresh_header()
        if auto_approves(self.rune.settings.approval, pending):
            self._note(f"approved by --yes: {pending.summary}")
            self._decide(Decision(True))
            return
        self.push_screen(ApprovalScreen(pending, self.step), self._decide)

    def _decide(self, decision: Decision | None) -> None:
        if decision is None:
            self._note("Approval left for later (ctrl+r to review it).")
            self._refresh_header()
            return
        self.pending = None
        operator = self.rune.operator
        if decision.approve:
            self._note("approved")
            self._call(operator.approve)
        else:
            self._note(f"rejected: {decision.reason or '(no reason)'}")
            self._call(lambda: operator.reject(decision.reason))

    # --- actions ----------------------------------------------------------------------------

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
