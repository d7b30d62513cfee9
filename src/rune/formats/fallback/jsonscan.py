"""Decode one JSON value at a position in model text, repairing only unambiguous damage.

The strict decoder runs first (``json.JSONDecoder.raw_decode`` with literal control
characters allowed, since models put raw newlines into code strings). Only when it fails is
the value re-read by :func:`_repair`, which fixes exactly these mistakes:

- a trailing comma before ``}`` or ``]``;
- single-quoted keys and values (``{'path': 'a.py'}``), when the closing quote is followed by
  ``:`` ``,`` ``}`` or ``]`` — anything else means the quote was an apostrophe, and it gives up;
- a backslash before a character JSON cannot escape (``"\\d+"``) is kept as a literal backslash;
- up to two missing ``}`` at the very end of the text it was given, when the text stops right
  after a complete value (a reply that stops inside a string was cut off, not damaged).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder(strict=False)
_SIMPLE_ESCAPES = frozenset('"\\/bfnrt')
_HEX = frozenset("0123456789abcdefABCDEF")
_AFTER_STRING = frozenset(":,}]")
MAX_MISSING_BRACES = 2


@dataclass(frozen=True, slots=True)
class Decoded:
    value: Any
    end: int


@dataclass(frozen=True, slots=True)
class Undecodable:
    reason: str
    cut_off: bool = False


class _Unrepairable(Exception):
    def __init__(self, reason: str, *, cut_off: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cut_off = cut_off


def decode_at(text: str, start: int, limit: int, *, repair: bool = True) -> Decoded | Undecodable:
    """The JSON value starting at ``text[start]``; repairs may only look up to ``limit``."""
    try:
        value, end = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as err:
        strict_reason = f"{err.msg} at character {err.pos - start + 1}"
    except RecursionError:
        # "[[[[..." from a model: Python's decoder recurses per level. Not a call, and no
        # repair can make one of it.
        return Undecodable("nested too deeply to be a tool call")
    else:
        return Decoded(value, end)
    if not repair:
        return Undecodable(strict_reason)
    try:
        fixed, consumed = _repair(text[start:limit])
        value, end = _DECODER.raw_decode(fixed)
    except _Unrepairable as err:
        return Undecodable(err.reason, cut_off=err.cut_off)
    except (json.JSONDecodeError, RecursionError):
        return Undecodable(strict_reason)
    if end != len(fixed):
        return Undecodable(strict_reason)
    return Decoded(value, start + consumed)


def _repair(source: str) -> tuple[str, int]:
    """Rewrite the value at the start of ``source``; return it and how much it consumed."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(source):
        char = source[i]
        if char in "\"'":
            text, i = _read_string(source, i)
            out.append(text)
            continue
        if char in "{[":
            stack.append(char)
        elif char in "}]":
            if not stack or "{[".index(stack.pop()) != "}]".index(char):
                raise _Unrepairable(f"unbalanced {char!r}")
            if not stack:
                out.append(char)
                return "".join(out), i + 1
        elif char == "," and _next_significant(source, i + 1) in ("}", "]"):
            i += 1
            continue
        out.append(char)
        i += 1
    missing = len(stack)
    last = "".join(out).rstrip()[-1:]
    if stack.count("{") != missing or missing > MAX_MISSING_BRACES or last in (",", ":", "{"):
        raise _Unrepairable("the call is cut off before it ends", cut_off=True)
    return "".join(out) + "}" * missing, len(source)


def _read_string(source: str, start: int) -> tuple[str, int]:
    """A string starting at a quote, re-written with double quotes; and where it ended."""
    quote = source[start]
    parts = ['"']
    i = start + 1
    while i < len(source):
        char = source[i]
        if char == "\\":
            if i + 1 >= len(source):
                break
            escaped = source[i + 1]
            if escaped in _SIMPLE_ESCAPES or (
                escaped == "u" and set(source[i + 2 : i + 6]) <= _HEX and i + 6 <= len(source)
            ):
                parts.append(char + escaped)
            elif escaped == "'" and quote == "'":
                parts.append("'")
            else:
                parts.append("\\\\" + escaped)
            i += 2
            continue
        if char == quote:
            if _next_significant(source, i + 1) not in _AFTER_STRING | {""}:
                raise _Unrepairable("a quote inside a string is not escaped")
            parts.append('"')
            return "".join(parts), i + 1
        parts.append('\\"' if char == '"' else char)
        i += 1
    raise _Unrepairable("the call is cut off inside a string", cut_off=True)


def _next_significant(source: str, start: int) -> str:
    for char in source[start:]:
        if not char.isspace():
            return char
    return ""
