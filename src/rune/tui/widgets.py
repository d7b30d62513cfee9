"""The pieces of the transcript: streamed text, collapsed thinking, one line per tool call."""

from __future__ import annotations

from rich.text import Text
from textual.content import Content
from textual.widgets import Collapsible, Static

from rune.frontend.view import describe_request, diff_text, tool_outcome
from rune.messages import ToolEvent, ToolRequest
from rune.text import visible

STATUS_LABEL = {
    "running": "⋯ running",
    "done": "✓ done",
    "failed": "✗ failed",
    "denied": "⊘ denied",
    "rejected": "↩ rejected",
    "pending_approval": "? waiting for approval",
}


class StreamedText(Static):
    """Text that grows as deltas arrive (a model's: escaped, never interpreted)."""

    def __init__(self, text: str = "", *, classes: str | None = None) -> None:
        super().__init__(visible(text), markup=False, classes=classes)
        self.text = visible(text)

    def append(self, delta: str) -> None:
        self.text += visible(delta)
        self.update(self.text)


class Thinking(Collapsible):
    """The model's thinking: collapsed, with the stream inside."""

    def __init__(self) -> None:
        self.body = StreamedText(classes="thinking-text")
        super().__init__(self.body, title="thinking", collapsed=True, classes="thinking")

    def append(self, delta: str) -> None:
        self.body.append(delta)


class ToolLine(Collapsible):
    """One tool call: its status in the title, its output (or error) inside, on demand."""

    def __init__(self, request: ToolRequest, step: str) -> None:
        self.name_and_step = f"{visible(request.name, keep='')} [{step}]"
        self.arguments = describe_request("", dict(request.arguments)).strip()
        self.outcome = ""
        self.status = "running"
        self.output = Static("", markup=False, classes="tool-output")
        # Content, not a string: a Collapsible reads a string title as markup. Textual annotates
        # the title as str but hands it to CollapsibleTitle.label, which takes Content.
        super().__init__(
            self.output,
            title=Content(self._heading()),  # type: ignore[arg-type]
            collapsed=True,
            classes="tool running",
        )

    def _heading(self) -> str:
        # Status and outcome first: a long argument (file content) may be cut at the edge.
        outcome = f" — {self.outcome}" if self.outcome else ""
        status = STATUS_LABEL.get(self.status, self.status)
        return f"{status}  {self.name_and_step}{outcome}  ({self.arguments})"

    def waiting(self) -> None:
        """The call waits for the user's approval, not running."""
        self.remove_class(self.status)
        self.status = "pending_approval"
        self.add_class(self.status)
        self.title = Content(self._heading())  # type: ignore[assignment]  # as in __init__

    def finish(self, event: ToolEvent) -> None:
        self.remove_class(self.status)
        self.status = event.status
        self.add_class(event.status)
        self.outcome = tool_outcome(event)
        self.title = Content(self._heading())  # type: ignore[assignment]  # as in __init__
        if event.preview and event.status in ("done", "rejected", "pending_approval"):
            body = diff_text(event.preview)
            if event.output:
                body.append("\n" + visible(event.output))
            self.output.update(body)
        else:
            self.output.update(Text(visible(event.output or event.error or "")))
