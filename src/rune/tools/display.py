"""Text shown to the operator for approval: nothing in it may hide or rewrite what it says.

Control characters (ANSI escapes, carriage returns), bidi overrides, zero-width characters and
lone surrogates are shown as ``\\xNN`` / ``\\uNNNN`` escapes, with a note saying how many there
were, so a preview cannot display differently from what will run or be written.
"""

from __future__ import annotations

import difflib
import unicodedata
from pathlib import Path

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_hidden(text: str, keep: str = "\n\t") -> tuple[str, int]:
    """``text`` with every hidden character escaped (except those in ``keep``), and their count."""
    out: list[str] = []
    count = 0
    for ch in text:
        if ch not in keep and unicodedata.category(ch) in _HIDDEN:
            out.append(_escape_char(ch))
            count += 1
        else:
            out.append(ch)
    return "".join(out), count


def hidden_note(count: int) -> str:
    return (
        f"[{count} control or invisible character(s) shown escaped as \\xNN or \\uNNNN]"
        if count
        else ""
    )


def for_display(text: str, keep: str = "\n\t") -> str:
    """``text`` escaped for a terminal, with the note appended on its own line when needed."""
    shown, count = escape_hidden(text, keep)
    return f"{shown}\n{hidden_note(count)}" if count else shown


def is_binary(data: bytes | None) -> bool:
    """Whether file content looks binary (a NUL byte early on), as git and grep decide."""
    return data is not None and b"\0" in data[:8192]


def _lines(text: str) -> list[str]:
    # Only "\n" ends a line here: str.splitlines also splits on \r, \x0b, \x1c, U+2028..., which
    # would let those characters pass as line ends instead of being escaped.
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def unified_diff(path: Path, before: bytes | None, after: bytes) -> str:
    """The change from ``before`` (None: the file is new) to ``after``, safe to display."""
    if is_binary(before) or is_binary(after):
        old = "(new file)" if before is None else f"{len(before)} bytes"
        return f"binary file {for_display(str(path))}: {old} -> {len(after)} bytes\n"
    old_lines = [] if before is None else _lines(before.decode("utf-8", "replace"))
    new_lines = _lines(after.decode("utf-8", "replace"))
    diff = difflib.unified_diff(
        old_lines,
        new_lines,
        fromfile="/dev/null" if before is None else f"a{path}",
        tofile=f"b{path}",
    )
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff
    )
    return for_display(text or f"(no change to {path})\n")
