"""The approval screen: exactly what will change, then approve (a) or reject with a reason (r)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Label, Static

from rune.messages import PendingApproval
from rune.text import visible
from rune.view import Decision, diff_text, is_command, sensitive_note


class ApprovalScreen(ModalScreen[Decision | None]):
    """Dismisses with a :class:`Decision`, or ``None`` when left for later (escape)."""

    BINDINGS = [  # noqa: RUF012 - Textual reads this class attribute
        Binding("a", "approve", "approve"),
        Binding("r", "reject", "reject with reason"),
        Binding("escape", "later", "decide later"),
    ]

    def __init__(self, pending: PendingApproval, step: str) -> None:
        super().__init__()
        self.pending = pending
        self.step = step

    def compose(self) -> ComposeResult:
        with Vertical(id="approval"):
            yield Label(f"Approval needed · {self.step}", id="approval-title")
            yield Label(visible(self.pending.summary), id="approval-summary", markup=False)
            if self.pending.sensitive:
                note = sensitive_note(self.pending.sensitive).strip()
                yield Label(visible(note), classes="bad", markup=False)
            with VerticalScroll(id="approval-preview"):
                if is_command(self.pending):
                    yield Static(f"$ {visible(self.pending.preview.strip())}", markup=False)
                    where = (
                        "runs contained (bubblewrap)"
                        if self.pending.contained
                        else "runs UNCONTAINED, with your rights"
                    )
                    yield Label(where, classes="contained" if self.pending.contained else "bad")
                else:
                    yield Static(diff_text(self.pending.preview), id="approval-diff")
            hint = "why not? (the model reads this) — Enter to send"
            reason = Input(placeholder=hint, id="reason")
            # Hidden from the start, not in on_mount: a quick approve can dismiss the screen
            # before on_mount runs.
            reason.display = False
            yield reason
        yield Footer()

    def action_approve(self) -> None:
        self.dismiss(Decision(True))

    def action_reject(self) -> None:
        reason = self.query_one("#reason", Input)
        reason.display = True
        reason.focus()

    def action_later(self) -> None:
        self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(Decision(False, event.value.strip()))
