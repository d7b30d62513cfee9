"""What Rune takes from a model: how many turns a run gets, and the size and shape of one reply.

:data:`MIN_ITERATIONS`..:data:`MAX_ITERATIONS` is the range of ``max_iterations``, the model
calls one run may make (resumes included); the default is the maximum.

Whoever controls a model's output may send anything. These limits turn the shapes that would
exhaust memory or the interpreter's stack (or make ``json``/``repr`` refuse an integer) into
typed errors, checked where a reply enters Rune:

- :data:`MAX_STREAM_BYTES`: bytes a transport reads for one reply, framing included; past it
  the transport stops reading and raises ``ProtocolError``;
- :data:`MAX_REPLY_CHARS`: the text of one reply (content, thinking and tool-call arguments
  together); a larger reply is a ``ProtocolError``;
- :data:`MAX_NESTING`: how deep any JSON value of a reply nests;
- :data:`MAX_INT_DIGITS`: how long an integer may be;
- :data:`MAX_CALLS_PER_TURN`: how many tool calls of one assistant turn run; the runtime answers
  the others with an error the model can read.

A reply over one of the first four ends the run as a typed failure; tool-call arguments that
arrive as text and break a limit become a tool error for that call instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rune.errors import ProtocolError

MIN_ITERATIONS = 1
MAX_ITERATIONS = 8
#: budgets of ``max_iterations`` turns one task may chain while each makes progress (a change
#: made): the default, and the most a setting may ask for
DEFAULT_BUDGETS = 3
MAX_BUDGETS = 10
MAX_STREAM_BYTES = 64 * 1024 * 1024
MAX_REPLY_CHARS = 8 * 1024 * 1024
MAX_NESTING = 64
MAX_INT_DIGITS = 100
MAX_CALLS_PER_TURN = 32

# 10**100 < 2**333: an integer needing more bits has more than MAX_INT_DIGITS digits.
_MAX_INT_BITS = 333


def shape_problem(value: Any, *, max_depth: int = MAX_NESTING) -> str | None:
    """Why ``value`` (JSON-like data) is not a shape Rune takes, or None. Iterative: a value
    nested a million levels deep costs a loop, not the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    chars = 0
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nested more than {max_depth} levels deep"
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, bool) or item is None or isinstance(item, float):
            pass
        elif isinstance(item, int):
            if item.bit_length() > _MAX_INT_BITS:
                return f"carrying an integer of more than {MAX_INT_DIGITS} digits"
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                chars += len(key) if isinstance(key, str) else 0
                stack.append((inner, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((inner, depth + 1) for inner in item)
        if chars > MAX_REPLY_CHARS:
            return f"larger than {MAX_REPLY_CHARS // (1024 * 1024)} MiB of text"
    return None


def too_large(what: str) -> ProtocolError:
    return ProtocolError(
        f"{what} is larger than {MAX_REPLY_CHARS // (1024 * 1024)} MiB of text; Rune stopped "
        "reading it"
    )


class ReplyMeter:
    """Counts the text of one reply as a transport accumulates it, and stops it at
    :data:`MAX_REPLY_CHARS` (before it is all in memory, not after)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.chars = 0

    def add(self, text: str) -> None:
        self.chars += len(text)
        if self.chars > MAX_REPLY_CHARS:
            raise too_large(self.what)
