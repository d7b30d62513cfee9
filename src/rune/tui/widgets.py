"""The pieces of the transcript: streamed text, collapsed thinking, one line per tool call."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Collapsible, Static

from rune.cli.render import describe_request, diff_text, tool_outcome
from rune.messages import ToolEvent, ToolRequest

STATUS_LABEL = {
    "running": "⋯ running",
    "done": "✓ done",
    "failed": "✗ failed",
    "denied": "⊘ denied",
    "rejected": "↩ rejected",
    "pending_approval": "? waiting for approval",
}


class StreamedText(Static):
    """Text that grows as deltas arrive."""

    def __init__(self, text: str = "", *, classes: str | None = None) -> None:
        super().__init__(text, markup=False, classes=classes)
        self.text = text

    def append(self, delta: str) -> None:
        self.text += delta
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
        self.name_and_step = f"{request.name} [{step}]"
        self.arguments = describe_request("", dict(request.arguments)).strip()
        self.outcome = ""
        self.status = "running"
        self.output = Static("", markup=False, classes="tool-output")
        super().__init__(self.output, title=self._heading(), collapsed=True, classes="tool running")

    def _heading(self) -> str:
        # Status and outcome first: a long argument (file content) may be cut at the edge.
        outcome = f" — {self.outcome}" if self.outcome else ""
        status = STATUS_LABEL.get(self.status, self.status)
        return f"{status}  {self.name_and_step}{outcome}  ({self.arguments})"

    def finish(self, event: ToolEvent) -> None:
        self.remove_class(self.status)
        self.status = event.status
        self.add_class(event.status)
        self.outcome = tool_outcome(event)
        self.title = self._heading()
        if event.preview and event.status in ("done", "rejected", "pending_approval"):
            body = diff_text(event.preview)
            if event.output:
                body.append("\n" + event.output)
            self.output.update(body)
        else:
            self.output.update(Text(event.output or event.error or ""))
