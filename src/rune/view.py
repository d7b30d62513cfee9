"""What the CLI and the TUI show alike: a tool request in one line, a coloured diff, the
outcome of a tool call, the line a sensitive approval carries, and the decision a person makes.

Everything a model wrote goes through :func:`rune.text.visible` (escape sequences shown, never
run) and into a ``rich`` ``Text``, never a markup string.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from rune.messages import PendingApproval, ToolEvent
from rune.text import visible

MAX_ARGUMENT_CHARS = 60


def describe_request(name: str, arguments: object) -> str:
    """``read_file path='calc.py'``: long values (file contents) are cut short; control and
    invisible characters are escaped."""
    if not isinstance(arguments, dict):
        return visible(name, keep="")
    parts = []
    for key, value in arguments.items():
        shown = _short_repr(value)
        if len(shown) > MAX_ARGUMENT_CHARS:
            shown = shown[: MAX_ARGUMENT_CHARS - 1] + "…"
        parts.append(f"{visible(key, keep='')}={visible(shown, keep='')}")
    return " ".join([visible(name, keep=""), *parts])


def _short_repr(value: object) -> str:
    # Only the head is shown: never build the repr of a megabyte of content (or of an integer
    # too long for repr) to cut it to 60 characters.
    if isinstance(value, str) and len(value) > MAX_ARGUMENT_CHARS:
        value = value[:MAX_ARGUMENT_CHARS]
    try:
        return repr(value)
    except ValueError:
        return f"<{type(value).__name__}>"


def diff_text(preview: str) -> Text:
    """A unified diff coloured line by line the way git does."""
    text = Text()
    for line in visible(preview).splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        else:
            style = ""
        text.append(line, style=style)
    return text


def is_command(pending: PendingApproval) -> bool:
    """Commands say whether they run contained; file edits leave ``contained`` unset."""
    return pending.contained is not None


def sensitive_note(reason: str) -> str:
    """The line an approval of a sensitive change carries."""
    return f"  sensitive: {reason}; asked even under --yes"


def tool_outcome(event: ToolEvent) -> str:
    """The short tail of a tool line: what it produced or why it did not."""
    if event.ok:
        output = event.output or ""
        warning = next((ln for ln in output.splitlines() if ln.startswith("WARNING:")), None)
        lines = output.count("\n") + 1 if output else 0
        outcome = f"{lines} line{'s' if lines != 1 else ''} of output"
        return outcome if warning is None else f"{outcome}; {visible(warning, keep='')}"
    return visible((event.error or event.status).splitlines()[0] or event.status, keep="")


@dataclass(frozen=True)
class Decision:
    approve: bool
    reason: str = ""
