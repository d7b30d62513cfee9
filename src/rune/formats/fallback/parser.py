"""Find the tool calls in a model's text reply, in the formats models really write.

Accepted, and nothing else:

- ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` — the prompt's format, which is
  also Hermes/Qwen's; several per reply; a list inside the tags; the closing tag may be missing;
- Mistral ``[TOOL_CALLS][{"name": …, "arguments": {…}}, …]`` and ``[TOOL_CALLS]name[ARGS]{…}``;
- a bare JSON object, or one in a ```json fence, that is exactly a call of a *known* tool:
  ``{"name": …, "arguments": {…} or "<JSON string>"}`` or Llama's ``{"name": …, "parameters":
  {…}}`` (only ``id`` and ``type: "function"`` may sit beside them), or a list of such calls.

One left-to-right pass reads the reply. Each JSON value is consumed whole by the decoder, so
braces, quotes, tags and fences inside argument strings never confuse it (Ollama #12017).
What is never a call: thinking (``<think>…</think>``, an unclosed ``<think>``, everything
before an unmatched ``</think>``), code fences in another language, JSON after a cue such as
"for example", a call-shaped object of an unknown tool inside prose, and anything from a
``<tool_response`` the model wrote itself (a fabricated result) onward.

A reply that clearly tries to call — tags, ``[TOOL_CALLS]``, or a call-shaped object standing
alone — but cannot be used yields ``error`` and no calls at all, so the model re-sends the
whole turn rather than half of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from rune.formats.fallback.jsonscan import Decoded, Undecodable, decode_at
from rune.formats.fallback.prompt import CALL_CLOSE, CALL_OPEN

MISTRAL_OPEN = "[TOOL_CALLS]"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
FABRICATED_RESULT = "<tool_response"

#: fence languages whose body is read like prose; any other language is code, never parsed
_TRANSPARENT_FENCES = frozenset({"", "json", "jsonc", "json5", "tool_call", "xml", "text"})
_BARE_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})
_MARKER = re.compile(
    r"<think>|</think>|<tool_call>|</tool_call>|\[TOOL_CALLS\]|<tool_response\b|```|[{\[]"
)
_FENCE_OPENER = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*(?:\n|\Z)")
_FENCE_CLOSER = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)
_CALL_START = re.compile(r"""\{\s*["']name["']\s*:\s*["']([^"'\n]{1,80})["']""")
_MISTRAL_NAMED = re.compile(r"\s*([A-Za-z_][\w.-]*)(?:\[CALL_ID\][\w-]*)?\[ARGS\]")
_EXAMPLE_CUE = re.compile(
    r"\b(?:for example|for instance|example|sample|such as|would look like|might look like|"
    r"could look like|syntax|template|schema)\b|\be\.g\.",
    re.IGNORECASE,
)
_CUE_WINDOW = 200


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any]
    #: "tagged" (``<tool_call>``), "mistral" or "json" (bare or fenced)
    format: str = "tagged"


@dataclass(frozen=True)
class ParseOutcome:
    """Calls found in a reply, in order; ``error`` when the reply tried to call and failed.

    ``visible_text`` is the reply without thinking and without the calls; ``thinking`` is the
    inline thinking that was set aside; ``attempted`` says the reply used call syntax at all.
    """

    calls: tuple[ParsedCall, ...] = ()
    error: str | None = None
    visible_text: str = ""
    attempted: bool = field(default=False)
    thinking: str = ""


def parse_tool_calls(text: str, known_tools: Collection[str]) -> ParseOutcome:
    """Find tool calls in ``text``. Thinking is never parsed."""
    return _Scanner(text, frozenset(known_tools)).run()


def strip_thinking(text: str) -> str:
    """``text`` without its thinking; calls and prose are kept as written."""
    scanner = _Scanner(text, frozenset())
    scanner.run()
    return _cut(text, scanner.thinking, 0, len(text)).strip()


class _ProblemCall(Exception):
    """A call the model clearly meant but that cannot be used; the message is for the model."""


@dataclass
class _Site:
    start: int
    end: int
    calls: list[ParsedCall]
    error: str | None = None


class _Scanner:
    def __init__(self, text: str, known: frozenset[str]) -> None:
        self.text = text
        self.known = known
        self.end = len(text)
        self.sites: list[_Site] = []
        self.thinking: list[tuple[int, int]] = []
        # Spans of fence markers and stray closing tags: not calls, not shown either.
        self.hidden: list[tuple[int, int]] = []
        self.fence_open: tuple[int, int, int] | None = None  # marker span, sites before it

    def run(self) -> ParseOutcome:
        pos = 0
        while pos < self.end:
            match = _MARKER.search(self.text, pos, self.end)
            if match is None:
                break
            pos = self._handle(match)
        return self._outcome()

    def _handle(self, match: re.Match[str]) -> int:
        token, start = match.group(), match.start()
        if token == THINK_OPEN:
            close = self.text.find(THINK_CLOSE, match.end(), self.end)
            stop = self.end if close < 0 else close + len(THINK_CLOSE)
            self.thinking.append((start, stop))
            return stop
        if token == THINK_CLOSE:
            # The opening tag was in the chat template: everything before is thinking.
            self.sites.clear()
            self.hidden.clear()
            self.fence_open = None
            self.thinking = [(0, match.end())]
            return match.end()
        if token == CALL_CLOSE:
            self.hidden.append((start, match.end()))
            return match.end()
        if token.startswith(FABRICATED_RESULT):
            self.end = start
            return start
        if token == "```":
            return self._fence(match)
        if token == CALL_OPEN:
            after = self._skip_space(match.end())
            if self.text.startswith(CALL_OPEN, after):
                # "<tool_call><tool_call>{…}": a doubled opener, not an empty call.
                self.hidden.append((start, after))
                return after
            return self._site(start, self._tagged)
        if token == MISTRAL_OPEN:
            return self._site(start, self._mistral)
        return self._bare(start)

    # --- explicit call syntax -------------------------------------------------------------

    def _site(self, start: int, read: Callable[[int], tuple[list[ParsedCall], int]]) -> int:
        """Run ``read`` (which returns calls and the end) and record a site, good or bad."""
        try:
            calls, end = read(start)
        except _ProblemCall as problem:
            self.sites.append(_Site(start, self.end, [], str(problem)))
            return self.end
        self.sites.append(_Site(start, end, calls))
        return end

    def _tagged(self, start: int) -> tuple[list[ParsedCall], int]:
        pos = self._skip_space(start + len(CALL_OPEN))
        limit = self._first_of(pos, CALL_CLOSE, CALL_OPEN, FABRICATED_RESULT)
        inner_fence = _FENCE_OPENER.match(self.text, pos, limit)
        if inner_fence:
            pos = self._skip_space(inner_fence.end())
        if pos >= limit:
            raise _ProblemCall(
                "the reply ended inside the tool call"
                if limit == self.end
                else "the tool call is empty"
            )
        if self.text[pos] not in "{[":
            raise _ProblemCall(
                'the tool call must be a JSON object {"name": ..., "arguments": {...}}'
            )
        calls: list[ParsedCall] = []
        while pos < limit and self.text[pos] in "{[":
            value, pos = self._decode_or_fail(pos, limit)
            calls.extend(self._calls_from(value, "tagged"))
            pos = self._skip_space(pos, ",")
        if self.text.startswith("```", pos):
            pos = self._skip_space(pos + 3)
        close = self.text.find(CALL_CLOSE, pos, self.end)
        following = self.text.find(CALL_OPEN, pos, self.end)
        if close >= 0 and (following < 0 or close < following):
            pos = close + len(CALL_CLOSE)
        return calls, pos

    def _mistral(self, start: int) -> tuple[list[ParsedCall], int]:
        pos = self._skip_space(start + len(MISTRAL_OPEN))
        limit = self._first_of(pos, MISTRAL_OPEN, FABRICATED_RESULT)
        if pos < limit and self.text[pos] in "{[":
            value, end = self._decode_or_fail(pos, limit)
            return self._calls_from(value, "mistral"), end
        named = _MISTRAL_NAMED.match(self.text, pos, limit)
        if named is None:
            raise _ProblemCall(
                f'after {MISTRAL_OPEN} write a JSON list [{{"name": ..., "arguments": {{...}}}}]'
            )
        args_at = self._skip_space(named.end())
        if args_at >= limit or self.text[args_at] != "{":
            raise _ProblemCall(f"the arguments of {named.group(1)} must be a JSON object")
        arguments, end = self._decode_or_fail(args_at, limit)
        return self._calls_from({"name": named.group(1), "arguments": arguments}, "mistral"), end

    def _decode_or_fail(self, pos: int, limit: int) -> tuple[Any, int]:
        decoded = decode_at(self.text, pos, limit)
        if isinstance(decoded, Undecodable):
            if decoded.cut_off:
                raise _ProblemCall(f"the tool call is incomplete ({decoded.reason})")
            raise _ProblemCall(f"the tool call is not valid JSON ({decoded.reason})")
        return decoded.value, decoded.end

    def _calls_from(self, value: Any, fmt: str) -> list[ParsedCall]:
        """Calls written with explicit syntax: lenient about shape, strict about the name."""
        items = value if isinstance(value, list) else [value]
        if not items:
            raise _ProblemCall("the tool call list is empty")
        calls = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise _ProblemCall('a tool call needs "name" and "arguments"')
            name = item["name"]
            if name not in self.known:
                raise _ProblemCall(self._unknown(name))
            raw = item.get("arguments", item.get("parameters", {}))
            calls.append(ParsedCall(name, _arguments(name, raw), fmt))
        return calls

    def _unknown(self, name: str) -> str:
        valid = ", ".join(sorted(self.known)) or "(none)"
        return f"unknown tool {name!r}; valid tools: {valid}"

    # --- bare and fenced JSON -------------------------------------------------------------

    def _bare(self, start: int) -> int:
        looks_like_call = _CALL_START.match(self.text, start, self.end)
        # Repairing re-reads the rest of the text: only worth it for what starts like a call.
        limit = (
            self._first_of(start, "```", CALL_OPEN, MISTRAL_OPEN, FABRICATED_RESULT)
            if looks_like_call
            else self.end
        )
        decoded = decode_at(self.text, start, limit, repair=looks_like_call is not None)
        if isinstance(decoded, Decoded):
            self._bare_value(start, decoded)
            return decoded.end
        if looks_like_call is None or self._shown_as_example(start):
            return start + 1
        name = looks_like_call.group(1)
        if name not in self.known and not self._stands_alone(start, limit):
            return start + 1
        problem = "incomplete" if decoded.cut_off else "not valid JSON"
        self.sites.append(_Site(start, limit, [], f"the tool call is {problem} ({decoded.reason})"))
        return limit

    def _bare_value(self, start: int, decoded: Decoded) -> None:
        shaped = _call_shaped(decoded.value)
        if shaped is None or self._shown_as_example(start):
            return
        unknown = [item["name"] for item in shaped if item["name"] not in self.known]
        if unknown:
            if self._stands_alone(start, decoded.end):
                self.sites.append(_Site(start, decoded.end, [], self._unknown(unknown[0])))
            return
        try:
            calls = [
                ParsedCall(item["name"], _arguments(item["name"], _raw_arguments(item)), "json")
                for item in shaped
            ]
        except _ProblemCall as problem:
            self.sites.append(_Site(start, decoded.end, [], str(problem)))
            return
        self.sites.append(_Site(start, decoded.end, calls))

    def _fence(self, match: re.Match[str]) -> int:
        start = match.start()
        if self.fence_open is not None:
            opener_start, opener_end, sites_before = self.fence_open
            self.fence_open = None
            if len(self.sites) > sites_before:
                self.hidden += [(opener_start, opener_end), (start, match.end())]
            return match.end()
        opener = _FENCE_OPENER.match(self.text, start, self.end)
        assert opener is not None  # the pattern matches any "```"
        if opener.group(1).lower() in _TRANSPARENT_FENCES:
            self.fence_open = (start, opener.end(), len(self.sites))
            return opener.end()
        closer = _FENCE_CLOSER.search(self.text, opener.end(), self.end)
        return self.end if closer is None else closer.end()

    def _shown_as_example(self, start: int) -> bool:
        before = self._prose_before(start)
        paragraph = before[before.rfind("\n\n") + 1 :][-_CUE_WINDOW:]
        return _EXAMPLE_CUE.search(paragraph) is not None

    def _stands_alone(self, start: int, end: int) -> bool:
        """Nothing but whitespace, thinking and fence markers around ``text[start:end]``."""
        outside = _cut(self.text, [*self.thinking, (start, end)], 0, self.end)
        return not _FENCE_OPENER.sub("", outside).strip()

    def _prose_before(self, start: int) -> str:
        after = max([0, *(s.end for s in self.sites), *(t[1] for t in self.thinking)])
        return _cut(self.text, self.thinking, min(after, start), start)

    # --- helpers --------------------------------------------------------------------------

    def _skip_space(self, pos: int, extra: str = "") -> int:
        while pos < self.end and (self.text[pos].isspace() or self.text[pos] in extra):
            pos += 1
        return pos

    def _first_of(self, pos: int, *markers: str) -> int:
        found = [self.text.find(m, pos, self.end) for m in markers]
        return min([f for f in found if f >= 0], default=self.end)

    def _outcome(self) -> ParseOutcome:
        thinking = "\n".join(self.text[a:b] for a, b in self.thinking)
        thinking = thinking.replace(THINK_OPEN, "").replace(THINK_CLOSE, "").strip()
        removed = [*self.thinking, *self.hidden, *((s.start, s.end) for s in self.sites)]
        visible = _cut(self.text, removed, 0, self.end).strip()
        error = next((s.error for s in self.sites if s.error is not None), None)
        calls = () if error else tuple(c for s in self.sites for c in s.calls)
        return ParseOutcome(calls, error, visible, bool(self.sites), thinking)


def _call_shaped(value: Any) -> list[dict[str, Any]] | None:
    """The call objects in ``value`` if it is exactly one call or a list of calls, else None."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(_is_call_object(item) for item in items):
        return None
    return items


def _is_call_object(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("name"), str)
        and set(item) <= _BARE_KEYS
        and ("arguments" in item) != ("parameters" in item)
        and item.get("type", "function") == "function"
    )


def _raw_arguments(item: dict[str, Any]) -> Any:
    return item["arguments"] if "arguments" in item else item["parameters"]


def _arguments(name: str, raw: Any) -> dict[str, Any]:
    """The arguments object, also when the model sent it JSON-encoded as a string."""
    if isinstance(raw, str):
        encoded = raw.strip() or "{}"
        decoded = decode_at(encoded, 0, len(encoded)) if encoded[0] == "{" else None
        if not isinstance(decoded, Decoded) or decoded.end != len(encoded):
            raise _ProblemCall(f"the arguments of {name} are a string that is not a JSON object")
        raw = decoded.value
    if not isinstance(raw, dict):
        raise _ProblemCall(f"the arguments of {name} must be a JSON object")
    return raw


def _cut(text: str, spans: list[tuple[int, int]], start: int, end: int) -> str:
    """``text[start:end]`` without the given spans."""
    pieces, pos = [], start
    for a, b in sorted(spans):
        if b <= pos or a >= end:
            continue
        pieces.append(text[pos : max(a, pos)])
        pos = max(pos, min(b, end))
    pieces.append(text[pos:end])
    return "".join(pieces)
