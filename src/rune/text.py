"""Text from a model, made safe to show: the one escaping every edge uses.

Control characters (ANSI and OSC escape sequences, carriage returns, shift-out), bidi
overrides, zero-width and other format characters, line and paragraph separators and lone
surrogates are shown as ``\\xNN`` / ``\\uNNNN`` escapes, never sent to a terminal raw. The CLI
and the TUI use :func:`visible` for everything a model wrote (streamed text, thinking, tool
names and arguments, errors that quote them); tool previews use :func:`for_display`, which
adds a note saying how many characters were escaped. Escaping is idempotent: escaped text has
nothing left to escape.
"""

from __future__ import annotations

import functools
import re
import unicodedata

#: what a command that printed nothing shows in place of its output
NO_OUTPUT = "(no output)"

#: the Unicode categories that display differently from what they are, or not at all
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

# Every character of those categories lies in one of these ranges (tests/test_display.py checks
# it against the running Python's Unicode database); most text has none, so the scan is one
# regular-expression pass and the category is looked up only for the few candidates.
_CANDIDATES = (
    "\x00-\x1f\x7f-\xad"
    "\u0600-\u08ff"
    "\u1800-\u18ff"
    "\u2000-\u20ff"
    "\ud800-\udfff"
    "\ufe00-\uffff"
    "\U00010000-\U0010ffff"
)


@functools.cache
def _pattern(keep: str) -> re.Pattern[str]:
    kept = "".join(re.escape(ch) for ch in keep)
    return re.compile(f"(?![{kept}])[{_CANDIDATES}]" if kept else f"[{_CANDIDATES}]")


@functools.lru_cache(maxsize=4096)
def _escaped(ch: str) -> str | None:
    if unicodedata.category(ch) not in HIDDEN_CATEGORIES:
        return None
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_hidden(text: str, keep: str = "\n\t") -> tuple[str, int]:
    """``text`` with every hidden character escaped (except those in ``keep``), and their count."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        ch = match.group()
        shown = _escaped(ch)
        if shown is None:
            return ch
        count += 1
        return shown

    return _pattern(keep).sub(replace, text), count


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


def visible(text: object, keep: str = "\n\t") -> str:
    """``text`` (anything, as ``str``) escaped for a terminal, without a note: for streamed
    deltas, names and one-line labels."""
    return escape_hidden(text if isinstance(text, str) else str(text), keep)[0]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 token``, ``2 tokens``, ``0 wheels`` (``many``: an irregular plural)."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"


def fenced(body: str, language: str = "") -> str:
    """``body`` in a Markdown code fence, a longer fence when ``body`` holds one of its own
    (a model's code may quote three backticks, and the block must not end there)."""
    fence = "````" if "```" in body else "```"
    return f"{fence}{language}\n{body}\n{fence}"
