"""The approval screen: exactly what will change, then approve (a), approve and allow the like
for the rest of the session (s, when offered), or reject with a reason (r)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Label, Static

from rune.frontend.approvals import command_lines, heading
from rune.frontend.view import Decision, diff_text, is_command, sensitive_note
from rune.grants import offer
from rune.messages import PendingApproval
from rune.text import visible


class ApprovalScreen(ModalScreen[Decision | None]):
    """Dismisses with a :class:`Decision`, or ``None`` when left for later (escape)."""

    BINDINGS = [  # noqa: RUF012 - Textual reads this class attribute
        Binding("a", "approve", "approve"),
        Binding("s", "allow", "allow for this session"),
        Binding("r", "reject", "reject with reason"),
        Binding("escape", "later", "decide later"),
    ]

    def __init__(self, pending: PendingApproval, step: str) -> None:
        super().__init__()
        self.pending = pending
        self.step = step
        self.grant = offer(pending)

    def compose(self) -> ComposeResult:
        with Vertical(id="approval"):
            yield Label(f"Approval needed · {self.step}", id="approval-title", markup=False)
            yield Label(heading(self.pending), id="approval-summary", markup=False)
            if self.pending.sensitive:
                note = sensitive_note(self.pending.sensitive).strip()
                yield Label(visible(note), classes="bad", markup=False)
            with VerticalScroll(id="approval-preview"):
                if is_command(self.pending):
                    command, how = command_lines(self.pending)
                    yield Static("\n".join(command), id="approval-command", markup=False)
                    how_class = "contained" if self.pending.contained else "bad"
                    yield Label(how, classes=how_class, markup=False)
                else:
                    yield Static(diff_text(self.pending.preview), id="approval-diff")
            if self.grant is not None:
                yield Label(
                    f"s: approve, and allow {self.grant.describe()} for this session", markup=False
                )
            hint = "why not? (the model reads this) — Enter to send"
            reason = Input(placeholder=hint, id="reason")
            # Hidden from the start, not in on_mount: a quick approve can dismiss the screen
            # before on_mount runs.
            reason.display = False
            yield reason
        yield Footer()

    def action_approve(self) -> None:
        self.dismiss(Decision(True))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # "s" only where a grant is offered (never for a sensitive change).
        return self.grant is not None if action == "allow" else True

    def action_allow(self) -> None:
        if self.grant is not None:
            self.dismiss(Decision(True, grant=self.grant))

    def action_reject(self) -> None:
        reason = self.query_one("#reason", Input)
        reason.display = True
        reason.focus()

    def action_later(self) -> None:
        self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(Decision(False, event.value.strip()))
