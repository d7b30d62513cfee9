"""``rune sessions show ID``: a session as it happened, readable: each message, each approval
with the diff or the command it showed and how it was answered, each grant, each tool's whole
output. Never the protocol's raw JSON: a tool call is shown as one ``→`` line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.text import Text

from rune.cli.render import STATUS_MARK
from rune.frontend.view import describe_request, diff_text
from rune.sessions import records
from rune.sessions.fold import Folding
from rune.sessions.journal import Record
from rune.sessions.store import SessionStore
from rune.text import visible

#: the header fields shown, in order
HEADER_FIELDS = ("title", "workspace", "model", "backend", "created_at")


def show_session(store: SessionStore, session_id: str, out: Console, err: Console) -> None:
    contents = store.read(session_id)
    for warning in contents.warnings:
        err.print(Text(f"warning: {warning}", style="yellow"))
    Shower(out).show(contents.records, session_id)


#: what to type next, by where the session stands (the run's own last line says the same)
NEXT_STEPS = {
    "pending approval": "an approval is waiting: `rune resume {id}` shows it again to answer",
    "incomplete": "`rune resume {id} --continue` goes on with a fresh budget",
    "iteration limit": "`rune resume {id} --continue` runs the task on with a fresh budget",
    "failed": "`rune resume {id}` tries again from the last good point",
}


def next_step(status: str, session_id: str) -> str:
    """The line that ends ``sessions show``: how to pick the session up, when there is a way."""
    return NEXT_STEPS.get(status, "").format(id=session_id)


class Shower:
    """Prints records in the order a person saw them: the model's call, then the approval it
    needed (journaled first, so that a crash loses nothing), then the answer and the outcome."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.events: list[records.ToolFinished] = []
        self.approval: Mapping[str, Any] | None = None

    def show(self, journaled: Iterable[Record], session_id: str) -> None:
        # Read through the fold that resume reads through: the same records, the same state.
        folding = Folding()
        for record in journaled:
            body = folding.add(record)
            asked = (
                isinstance(body, records.MessageAdded) and body.message.get("role") == "assistant"
            )
            if isinstance(body, records.ToolFinished):
                self.events.append(body)
                continue
            if isinstance(body, records.Paused):
                self.approval = body.change
                continue
            if not asked:
                self._flush()
            match body:
                case records.Header():
                    self.out.print(Text(f"session {session_id}", style="bold"))
                    for key in HEADER_FIELDS:
                        line = visible(f"  {key}: {getattr(body, key)}", keep="")
                        self.out.print(Text(line, style="dim"))
                case records.UserTurn(message=message):
                    self._message(message, from_user=True)
                case records.MessageAdded(message=message):
                    self._message(message, from_user=False)
                case records.Decided():
                    self._decision(body)
                case records.Granted(grant=grant):
                    line = f"  allowed for the rest of the session: {grant.describe()}"
                    self.out.print(Text(visible(line), style="yellow"))
                case records.TurnEnded():
                    why = body.incomplete or body.error or ""
                    line = visible(f"── {body.ended}{': ' if why else ''}{why} ──")
                    self.out.print(Text(line, style="bold"))
            if asked:
                self._flush()
        self._flush()
        step = next_step(folding.status, session_id)
        if step:
            self.out.print(Text(step, style="yellow"))

    def _flush(self) -> None:
        """The approval waiting to be shown, then the tool events, whole."""
        self._show_approval()
        for finished in self.events:
            event = finished.tool_event()
            if event is None:
                continue
            mark, style = STATUS_MARK.get(event.status, ("·", ""))
            line = f"  {mark} {visible(event.name, keep='')} {event.status}"
            self.out.print(Text(line, style))
            body = event.output if event.ok else event.error
            for shown in visible(body, keep="\t\n").split("\n") if body else []:
                self.out.print(Text(f"    │ {shown}", style="dim"))
        self.events.clear()

    def _show_approval(self) -> None:
        change, self.approval = self.approval, None
        if change is None:
            return
        command = change.get("contained") is not None
        summary = "run a command" if command else str(change.get("summary") or "a change")
        self.out.print(Text(visible(f"  ? approval asked: {summary}"), style="yellow"))
        preview = str(change.get("preview") or "")
        if command:  # the command once, and how it ran
            for line in visible(preview.strip(), keep="\t\n").split("\n"):
                self.out.print(Text(f"    {line}", style="dim"))
        elif preview:
            for diff_line in diff_text(preview, cut=True).split("\n"):
                self.out.print(Text("    ").append_text(diff_line))

    def _decision(self, decided: records.Decided) -> None:
        self._show_approval()
        reason = f": {decided.reason}" if decided.reason else ""
        style = "green" if decided.decision == "approved" else "yellow"
        self.out.print(Text(visible(f"  {decided.decision}{reason}"), style=style))

    def _message(self, message: Mapping[str, Any], *, from_user: bool) -> None:
        role, content = message.get("role"), str(message.get("content") or "")
        if role == "tool":
            return  # its tool event shows it
        if role == "user":
            prefix = "> " if from_user else "  (sent to the model) "
            style = "bold" if from_user else "dim"
            self.out.print(Text(visible(prefix + content), style=style))
            return
        calls = message.get("tool_calls") or ()
        # With the text or constrained protocol, the content is the call itself, as JSON:
        # the → line below says it readably.
        if content.strip() and not (calls and content.lstrip().startswith(("{", "[", "```"))):
            self.out.print(Text(visible(content)))
        for call in calls:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            label = describe_request(str(function.get("name", "?")), function.get("arguments"))
            self.out.print(Text(f"  → {label}"))
