"""How the loop looks in a plain terminal: streamed text, dimmed thinking, one line per tool
event with ``step n/N``, coloured diffs, and the approve / reject question. What the TUI shows
the same way lives in :mod:`rune.view`.

Everything a model wrote (text, thinking, tool names and arguments, errors and warnings that
quote them) goes through :func:`rune.text.visible` and into a ``rich`` ``Text``, never a markup
string: an escape sequence is shown as ``\x1b``, and ``[/x]`` as itself."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.text import Text

from rune import events as ev
from rune.messages import OperatorResponse, PendingApproval, ToolRequest
from rune.text import visible
from rune.view import (
    Decision,
    describe_request,
    diff_text,
    is_command,
    sensitive_note,
    tool_outcome,
)

STATUS_MARK = {
    "done": ("✓", "green"),
    "failed": ("✗", "red"),
    "denied": ("⊘", "red"),
    "rejected": ("↩", "yellow"),
    "pending_approval": ("?", "yellow"),
}


class ConsoleReporter:
    """The CLI's event sink (see :mod:`rune.events`)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.at_line_start = True
        self.streamed_text = False
        self.streaming: str | None = None
        self.step = "step 0/0"

    def __call__(self, event: ev.LoopEvent) -> None:
        match event:
            case ev.TextDelta(text=text):
                self._stream(text, "", "text")
                self.streamed_text = True
            case ev.ThinkingDelta(text=text):
                self._stream(text, "dim italic", "thinking")
            case ev.IterationStarted(iteration=n, budget=budget):
                self.step = f"step {n}/{budget}"
                self.streamed_text = False
                self.line(Text(f"── {self.step} ──", style="bold blue"))
            case ev.ToolStarted(request=request):
                self.line(self._started(request))
            case ev.ToolFinished(event=tool_event):
                mark, style = STATUS_MARK.get(tool_event.status, ("·", ""))
                name = visible(tool_event.name, keep="")
                line = Text(f"  {mark} {name} {tool_event.status}: ", style=style)
                line.append(tool_outcome(tool_event), style="")
                self.line(line)
            case ev.FallbackPromptInjected() as injected:
                self.line(Text(visible(injected.describe()), style="dim"))
            case ev.Warning(message=message):
                self.line(Text(f"warning: {visible(message)}", style="yellow"))
            case _:
                pass

    def _started(self, request: ToolRequest) -> Text:
        label = describe_request(request.name, dict(request.arguments))
        return Text(f"  → {label}  [{self.step}]", style="")

    def _stream(self, text: str, style: str, kind: str) -> None:
        if self.streaming != kind and not self.at_line_start:
            self.console.print()
        if self.streaming != kind and kind == "thinking":
            self.console.print("thinking: ", style="dim", end="")
        self.streaming = kind
        self.console.print(Text(visible(text), style=style), end="", soft_wrap=True)
        self.at_line_start = text.endswith("\n")

    def line(self, renderable: Text | str) -> None:
        """One line; a plain string is shown as it is (escaped, never read as markup)."""
        if not self.at_line_start:
            self.console.print()
        if isinstance(renderable, str):
            renderable = Text(visible(renderable))
        self.console.print(renderable, soft_wrap=True)
        self.at_line_start = True
        self.streaming = None

    def show_approval(self, pending: PendingApproval) -> None:
        self.line(Text(f"Approval needed: {visible(pending.summary)}", style="bold yellow"))
        if pending.sensitive:
            self.line(Text(visible(sensitive_note(pending.sensitive)), style="bold magenta"))
        if is_command(pending):
            where = (
                "runs contained (bubblewrap)"
                if pending.contained
                else "runs UNCONTAINED, with your rights"
            )
            self.line(Text(f"  $ {visible(pending.preview.strip())}", style="bold"))
            self.line(Text(f"  {where}", style="green" if pending.contained else "bold red"))
        else:
            self.console.print(diff_text(pending.preview), end="", soft_wrap=True)

    def finish(self, response: OperatorResponse) -> None:
        if response.success:
            if not self.streamed_text and response.text:
                self.line(response.text)
            self.line(Text(f"✓ done ({response.budget_label})", style="bold green"))
        else:
            self.line(
                Text(
                    f"✗ {visible(response.error_kind or '')}: {visible(response.error or '')} "
                    f"({response.budget_label})",
                    style="bold red",
                )
            )


def ask_decision(
    console: Console, stdin: TextIO | None = None, read: Callable[[], str] | None = None
) -> Decision | None:
    """Ask approve / reject-with-reason on stdin; ``None`` when stdin has nothing to say."""
    stream = stdin if stdin is not None else sys.stdin
    readline = read or stream.readline
    while True:
        console.print(Text("approve? [a]pprove / [r]eject (with reason): ", style="bold"), end="")
        answer = readline()
        if not answer:
            console.print()
            return None
        choice, _, rest = answer.strip().partition(" ")
        if choice.lower() in ("a", "y", "yes", "approve"):
            return Decision(True)
        if choice.lower() in ("r", "n", "no", "reject"):
            reason = rest.strip()
            if not reason:
                console.print("reason (the model reads it): ", end="")
                reason = readline().strip()
            return Decision(False, reason)
        console.print("answer a or r")
