"""What an editor is shown: Rune's loop events and approvals as ACP session updates.

Pure functions of Rune's own types (no I/O): the agent (:mod:`rune.acp.agent`) sends what they
return. A tool call is ``pending`` from the moment the loop starts it until it is answered or
approved, ``in_progress`` once an approved change is being applied, and ``completed`` or
``failed`` (a refusal by the sandbox, a rejection and a stop count as failed) at its end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from acp import schema

from rune.messages import PendingApproval, ToolEvent, ToolRequest

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
#: the built-in tools' kinds (an MCP server's tool is ``other``)
KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "list_dir": "read",
    "search": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "replace_function": "edit",
    "format_code": "edit",
    "run_command": "execute",
    "run_python": "execute",
}
#: how much of one argument a title shows
TITLE_ARGUMENT = 80
#: how much of a tool's output an update carries (the model saw it whole)
OUTPUT_SHOWN = 8000

Update = (
    schema.AgentMessageChunk
    | schema.AgentThoughtChunk
    | schema.UserMessageChunk
    | schema.ToolCallStart
    | schema.ToolCallProgress
)


def kind_of(name: str) -> ToolKind:
    return KINDS.get(name, "other")


def title_of(name: str, arguments: Mapping[str, Any]) -> str:
    """``read_file calc.py``: the tool and its most telling argument, on one line."""
    for key in ("path", "command", "pattern", "name"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            one_line = " ".join(value.split())
            if len(one_line) > TITLE_ARGUMENT:
                one_line = one_line[: TITLE_ARGUMENT - 1] + "…"
            return f"{name} {one_line}"
    return name


def _locations(arguments: Mapping[str, Any]) -> list[schema.ToolCallLocation] | None:
    path = arguments.get("path")
    return [schema.ToolCallLocation(path=path)] if isinstance(path, str) and path else None


def text(value: str) -> schema.TextContentBlock:
    return schema.TextContentBlock(type="text", text=value)


def message(value: str) -> schema.AgentMessageChunk:
    return schema.AgentMessageChunk(session_update="agent_message_chunk", content=text(value))


def thought(value: str) -> schema.AgentThoughtChunk:
    return schema.AgentThoughtChunk(session_update="agent_thought_chunk", content=text(value))


def user_message(value: str) -> schema.UserMessageChunk:
    return schema.UserMessageChunk(session_update="user_message_chunk", content=text(value))


def started(call_id: str, request: ToolRequest) -> schema.ToolCallStart:
    return schema.ToolCallStart(
        session_update="tool_call",
        tool_call_id=call_id,
        title=title_of(request.name, request.arguments),
        kind=kind_of(request.name),
        status="pending",
        locations=_locations(request.arguments),
        raw_input=dict(request.arguments),
    )


def _shown(value: str) -> str:
    if len(value) <= OUTPUT_SHOWN:
        return value
    return value[:OUTPUT_SHOWN] + f"\n[... {len(value) - OUTPUT_SHOWN} more characters ...]"


def finished(call_id: str, event: ToolEvent) -> schema.ToolCallProgress:
    """The end of a call: its output (or why it failed) as text."""
    said = event.output if event.ok else f"{event.status}: {event.error or ''}"
    return schema.ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=call_id,
        status="completed" if event.ok else "failed",
        content=[schema.ContentToolCallContent(type="content", content=text(_shown(said or "")))],
        raw_output={"status": event.status, "output": event.output, "error": event.error},
    )


def applying(call_id: str) -> schema.ToolCallProgress:
    return schema.ToolCallProgress(
        session_update="tool_call_update", tool_call_id=call_id, status="in_progress"
    )


# --- approvals -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileDiff:
    """One file of a unified diff: the old and new sides of its hunks (old None: a new file)."""

    path: str
    old: str | None
    new: str


def parse_unified(preview: str) -> list[FileDiff]:
    """The files of the unified diff Rune shows for a change, each as its two sides; empty
    when ``preview`` is not one (a command's preview)."""
    found: list[FileDiff] = []
    path: str | None = None
    new_file = False
    old: list[str] = []
    new: list[str] = []

    def close() -> None:
        if path is not None:
            found.append(FileDiff(path, None if new_file else "".join(old), "".join(new)))

    for line in preview.splitlines(keepends=True):
        if line.startswith("--- "):
            close()
            path, old, new = None, [], []
            new_file = line.rstrip("\n") == "--- /dev/null"
        elif line.startswith("+++ ") and path is None:
            name = line[4:].rstrip("\n")
            # Rune writes ``b`` then the absolute path: ``+++ b/home/me/work/calc.py``
            path = name[1:] if name.startswith("b") else name
        elif path is None or line.startswith("@@") or line.startswith("\\"):
            continue
        elif line.startswith(" "):
            old.append(line[1:])
            new.append(line[1:])
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
    close()
    return found


def approval_content(
    pending: PendingApproval,
) -> list[schema.ContentToolCallContent | schema.FileEditToolCallContent]:
    """What a permission request shows: each file's diff when the change is an edit, then
    Rune's own preview as text (a command and how it runs; why a sensitive change asks)."""
    content: list[schema.ContentToolCallContent | schema.FileEditToolCallContent] = [
        schema.FileEditToolCallContent(type="diff", path=d.path, old_text=d.old, new_text=d.new)
        for d in parse_unified(pending.preview)
    ]
    shown = pending.preview
    if pending.sensitive:
        shown = f"{shown}\n\nasked even under --yes: {pending.sensitive}"
    content.append(schema.ContentToolCallContent(type="content", content=text(shown)))
    return content


def waiting(call_id: str, pending: PendingApproval) -> schema.ToolCallUpdate:
    """The tool call a permission request is about, with the change it would make."""
    return schema.ToolCallUpdate(
        tool_call_id=call_id,
        title=pending.summary,
        kind=kind_of(pending.name),
        status="pending",
        content=list(approval_content(pending)),
        locations=_locations(pending.arguments),
        raw_input=dict(pending.arguments),
    )


def waiting_update(call_id: str, pending: PendingApproval) -> schema.ToolCallProgress:
    shown = waiting(call_id, pending)
    return schema.ToolCallProgress(
        session_update="tool_call_update", **shown.model_dump(exclude_none=True)
    )
