"""How the loop looks in a plain terminal: streamed text, dimmed thinking, one line per tool
event with ``step n/N``, coloured diffs, and the approve / reject question. What the TUI shows
the same way lives in :mod:`rune.frontend.view`.

Everything a model wrote (text, thinking, tool names and arguments, errors and warnings that
quote them) goes through :func:`rune.text.visible` and into a ``rich`` ``Text``, never a markup
string: an escape sequence is shown as ``\x1b``, and ``[/x]`` as itself."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from rune import events as ev
from rune.frontend.approvals import command_lines, heading
from rune.frontend.view import (
    Decision,
    command_output,
    describe_request,
    diff_text,
    elapsed,
    is_command,
    outcome_text,
    output_excerpt,
    sensitive_note,
    tool_outcome,
)
from rune.grants import Grant
from rune.messages import OperatorResponse, PendingApproval, ToolEvent, ToolRequest
from rune.text import plural, visible

__all__ = ["STATUS_MARK", "ConsoleReporter", "Decision", "ask_decision", "page_text"]

STATUS_MARK = {
    "done": ("✓", "green"),
    "failed": ("✗", "red"),
    "denied": ("⊘", "red"),
    "rejected": ("↩", "yellow"),
    "pending_approval": ("?", "yellow"),
}
#: the style of each kind of outcome line (:func:`rune.frontend.view.outcome_text`)
OUTCOME_STYLE = {"done": "bold green", "warning": "bold yellow", "error": "bold red"}
#: how often the status line is redrawn (seconds)
TICK_SECONDS = 0.25


class ConsoleReporter:
    """The CLI's event sink (see :mod:`rune.events`), and its status line.

    On a terminal, while Rune waits (for the model, a command, the server), the last line says
    what for, for how long, how many tokens the model has streamed, and that Ctrl-C interrupts;
    it is redrawn by a ticker thread and erased before anything else is printed. Without a
    terminal there is no status line and no escape code.
    """

    def __init__(
        self,
        console: Console,
        *,
        session_id: str = "",
        progress: Callable[[], Any] | None = None,
        status_line: bool | None = None,
    ) -> None:
        self.console = console
        self.at_line_start = True
        self.streamed_text = False
        self.streaming: str | None = None
        self.step = "step 0/0"
        #: " · budget 2/3" once a task's first budget of turns was renewed
        self.budget = ""
        self.session_id = session_id
        self.progress = progress
        self.status_line = console.is_terminal if status_line is None else status_line
        self._lock = threading.RLock()
        self._activity: str | None = None
        self._since = time.monotonic()
        self._drawn = False
        self._ticker: threading.Thread | None = None
        self._stopped = threading.Event()

    # --- the status line -------------------------------------------------------------------

    def waiting(self, activity: str | None) -> None:
        """Say what Rune waits for now (None: nothing)."""
        with self._lock:
            if activity != self._activity:
                self._since = time.monotonic()
            self._activity = activity
            self._draw()
        if activity is not None and self.status_line and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="rune-status", daemon=True)
            self._ticker.start()

    def close(self) -> None:
        """Erase the status line and stop redrawing it."""
        self._stopped.set()
        with self._lock:
            self._activity = None
            self._erase()

    def _tick(self) -> None:
        while not self._stopped.wait(TICK_SECONDS):
            with self._lock:
                self._draw()

    def status_text(self) -> str | None:
        if self._activity is None:
            return None
        parts = [self._activity]
        call = self.progress() if self.progress is not None else None
        if call is not None:
            parts.append(elapsed(call.seconds))
            parts.append(plural(call.tokens, "token"))
        else:
            parts.append(elapsed(time.monotonic() - self._since))
        parts.append("Ctrl-C to interrupt")
        return " · ".join(parts)

    def _draw(self) -> None:
        if not self.status_line or not self.at_line_start:
            return
        text = self.status_text()
        if text is None:
            self._erase()
            return
        width = max(self.console.width - 1, 20)
        self._raw("\r" + text[:width] + "\x1b[K")
        self._drawn = True

    def _erase(self) -> None:
        if self._drawn:
            self._raw("\r\x1b[K")
            self._drawn = False

    def _raw(self, text: str) -> None:
        try:
            self.console.file.write(text)
            self.console.file.flush()
        except (OSError, ValueError):
            self.status_line = False

    # --- events ----------------------------------------------------------------------------

    def __call__(self, event: ev.LoopEvent) -> None:
        with self._lock:
            self._event(event)

    def _event(self, event: ev.LoopEvent) -> None:
        match event:
            case ev.TextDelta(text=text):
                self._stream(text, "", "text")
                self.streamed_text = True
            case ev.ThinkingDelta(text=text):
                self._stream(text, "dim italic", "thinking")
            case ev.BudgetRenewed(budget=number, budgets=budgets):
                self.budget = f" · budget {number}/{budgets}"
                self.line(
                    Text(
                        f"── budget {number}/{budgets}: the last one made a change ──", "bold blue"
                    )
                )
            case ev.IterationStarted(iteration=n, budget=budget):
                self.step = f"step {n}/{budget}{self.budget}"
                self.streamed_text = False
                self.line(Text(f"── {self.step} ──", style="bold blue"))
                self.waiting(f"{self.step}: waiting for the model")
            case ev.ModelCallFinished(seconds=seconds, tokens=tokens):
                spent = f"{elapsed(seconds)}, {plural(tokens, 'token')}"
                self.line(Text(f"  ({self.step}: {spent})", "dim"))
                self.waiting(None)
            case ev.ToolStarted(request=request):
                self.line(self._started(request))
                self.waiting(f"running {visible(request.name, keep='')}")
            case ev.ToolFinished(event=tool_event):
                self.waiting(None)
                self._finished(tool_event)
            case ev.ApprovalRequired():
                self.waiting(None)
            case ev.FallbackPromptInjected() as injected:
                self.line(Text(visible(injected.describe()), style="dim"))
            case ev.Warning(message=message):
                self.line(Text(f"warning: {visible(message)}", style="yellow"))

    def _started(self, request: ToolRequest) -> Text:
        label = describe_request(request.name, dict(request.arguments))
        # Rune's own calls (its run of the tests) take no model step
        where = "by Rune" if request.source == "rune" else self.step
        return Text(f"  → {label}  [{where}]", style="")

    def _finished(self, tool_event: ToolEvent) -> None:
        mark, style = STATUS_MARK.get(tool_event.status, ("·", ""))
        name = visible(tool_event.name, keep="")
        line = Text(f"  {mark} {name} {tool_event.status}: ", style=style)
        line.append(tool_outcome(tool_event), style="")
        self.line(line)
        output = command_output(tool_event)
        if output:
            for shown in output_excerpt(output, hint=self._see_all()):
                self.line(Text(f"    │ {shown}", style="dim"))

    def _see_all(self) -> str:
        return f"; `rune sessions show {self.session_id}` shows all" if self.session_id else ""

    def _stream(self, text: str, style: str, kind: str) -> None:
        if self.at_line_start:
            self._erase()
        if self.streaming != kind and not self.at_line_start:
            self.console.print()
        if self.streaming != kind and kind == "thinking":
            self.console.print("thinking: ", style="dim", end="")
        self.streaming = kind
        self.console.print(Text(visible(text), style=style), end="", soft_wrap=True)
        self.at_line_start = text.endswith("\n")
        self._draw()

    def line(self, renderable: Text | str) -> None:
        """One line; a plain string is shown as it is (escaped, never read as markup)."""
        with self._lock:
            self._erase()
            if not self.at_line_start:
                self.console.print()
            if isinstance(renderable, str):
                renderable = Text(visible(renderable))
            self.console.print(renderable, soft_wrap=True)
            self.at_line_start = True
            self.streaming = None
            self._draw()

    def show_approval(self, pending: PendingApproval) -> None:
        with self._lock:
            self.waiting(None)
            self._show_approval(pending)

    def _show_approval(self, pending: PendingApproval) -> None:
        self.line(Text(f"Approval needed: {heading(pending)}", style="bold yellow"))
        if pending.sensitive:
            self.line(Text(visible(sensitive_note(pending.sensitive)), style="bold magenta"))
        if is_command(pending):
            # The command once, then how it runs (containment and timeout) in one line.
            command, how = command_lines(pending)
            for shown in command:
                self.line(Text(f"  {shown}", style="bold"))
            self.line(Text(f"  {how}", style="green" if pending.contained else "bold red"))
        else:
            hint = " (answer d to page through it)" if self.console.is_terminal else ""
            self.console.print(diff_text(pending.preview, cut=True, hint=hint), end="")
            self.at_line_start = pending.preview.endswith("\n") or not pending.preview
            if not self.at_line_start:
                self.console.print()
                self.at_line_start = True

    def finish(
        self,
        response: OperatorResponse,
        *,
        outcome_line: bool = True,
        before_outcome: str | None = None,
    ) -> None:
        """The end of a run: the answer (when it was not streamed), ``before_outcome`` (what
        the run leaves on disk, when it did not finish), and the outcome."""
        self.close()
        if response.success and not self.streamed_text and response.text:
            self.line(response.text)
        if before_outcome:
            self.line(Text(before_outcome, style="yellow"))
        if not outcome_line:
            return
        then = ""
        if self.session_id:
            then = f"`rune resume {self.session_id} --continue` goes on with a fresh budget"
        text, kind = outcome_text(response, then)
        self.line(Text(text, style=OUTCOME_STYLE[kind]))


def ask_decision(
    console: Console,
    stdin: TextIO | None = None,
    read: Callable[[], str] | None = None,
    *,
    page: Callable[[], None] | None = None,
    grant: Grant | None = None,
) -> Decision | None:
    """Ask approve / reject-with-reason on stdin; ``None`` when stdin has nothing to say
    (closed, at its end, or not there at all). ``page`` adds "d": show the whole diff;
    ``grant`` adds "s": approve, and allow what it covers for the rest of the session."""
    stream = stdin if stdin is not None else sys.stdin

    def readline() -> str:
        try:
            if read is not None:
                return read()
            answer = stream.readline() if stream is not None else ""
            if answer and not stream.isatty():
                console.print()  # a terminal echoes the answer and its newline; a pipe does not
            return answer
        except (OSError, ValueError):  # a stdin closed under us
            return ""

    question = "approve? [a]pprove / [r]eject (with reason)"
    if grant is not None:
        question += f" / [s]ession: allow {grant.describe()}"
    question += " / [d]iff in full: " if page is not None else ": "
    while True:
        console.print(Text(question, style="bold"), end="")
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
        if choice.lower() == "d" and page is not None:
            page()
            continue
        if choice.lower() in ("s", "session") and grant is not None:
            return Decision(True, grant=grant)
        more = [letter for letter, offered in (("s", grant), ("d", page)) if offered is not None]
        console.print("answer a or r" + "".join(f", or {letter}" for letter in more))


def page_text(text: str) -> None:
    """Show ``text`` in the user's pager ($PAGER, else less), or print it when there is none."""
    command = shlex.split(os.environ.get("PAGER") or "less -R")
    if command and shutil.which(command[0]):
        try:
            subprocess.run(command, input=text, text=True, check=False)
            return
        except OSError:
            pass
    sys.stdout.write(text)
    sys.stdout.flush()
