"""The TUI's slash commands: what each does, in one line, and how a typed line is read.

A line that starts with ``/`` is a command for Rune, never a task for the model: a known one
runs, an unknown one is an error that lists the known ones.
"""

from __future__ import annotations

from dataclasses import dataclass

#: each command, and what it does (the order of /help)
COMMANDS: dict[str, str] = {
    "/help": "these commands, and the keys",
    "/diff": "the changes applied in this session so far",
    "/undo": "take back the session's last file change (`rune redo` brings it back)",
    "/model": "the model, its server and what it can do",
    "/sessions": "the latest sessions (`rune resume ID` goes on with one)",
    "/clear": "clear the screen (the conversation is kept)",
    "/quit": "quit; the session is kept for `rune resume`",
}

KEYS_HELP = (
    "keys: esc stops the model call and any running command · ctrl+g goes on after a stop · "
    "ctrl+r shows a pending approval · ctrl+o tool output · ctrl+t thinking · ctrl+q quits"
)


@dataclass(frozen=True)
class Slash:
    """A typed command: its name (``/diff``), or the error that it is not one."""

    name: str
    error: str | None = None


def parse(text: str) -> Slash | None:
    """The slash command ``text`` is, or None when it is a task (it does not start with ``/``).

    ``//x`` sends ``/x`` to the model as a task (a path, say): see :func:`task_text`."""
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return None
    name = stripped.split()[0].lower()
    if name in COMMANDS:
        return Slash(name)
    known = ", ".join(COMMANDS)
    return Slash(name, f"unknown command {name}; the commands are {known} (/help says more)")


def task_text(text: str) -> str:
    """The task a line sends: ``//x`` stands for ``/x``."""
    stripped = text.strip()
    return stripped[1:] if stripped.startswith("//") else stripped


def help_lines() -> list[str]:
    width = max(len(name) for name in COMMANDS)
    lines = [f"{name:<{width}}  {what}" for name, what in COMMANDS.items()]
    lines.append("//text  sends /text to the model as a task")
    return [*lines, KEYS_HELP]


def fit(parts: list[tuple[str, bool]], width: int, separator: str = " · ") -> str:
    """The parts that fit in ``width`` columns, in order: each required one (cut at the end
    when even those are too long), then each optional one that still fits."""
    required = [text for text, needed in parts if needed]
    line = separator.join(required)
    if len(line) > width:
        return line[: max(width - 1, 0)] + "…"
    room = width - len(line)
    kept = set()
    for index, (text, needed) in enumerate(parts):
        if not needed and len(separator) + len(text) <= room:
            kept.add(index)
            room -= len(separator) + len(text)
    return separator.join(
        text for index, (text, needed) in enumerate(parts) if needed or index in kept
    )
