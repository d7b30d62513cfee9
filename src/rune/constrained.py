"""The constrained tool protocol: every model turn is one JSON object the server's grammar allows.

For models that cannot be trusted to call tools natively (small ones, or a server whose native
calls come back as prose), Rune asks the server for structured output (OpenAI
``response_format`` json_schema, Ollama ``format``) constrained to::

    {"thought": "...", "tool": "<name>", "arguments": {<that tool's schema>}}
  | {"thought": "...", "answer": "..."}

built from the real tool schemas, so every reply parses and names a real tool with arguments of
the right shape. A tool call becomes a ``ToolRequest(source="constrained")``; an answer ends the
turn. Results go back as text, as in the text-fallback protocol. The loop semantics (dedup,
breaker, budget, approvals, pending state) are the loop's, unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rune.events import TextDelta, ThinkingDelta
from rune.fallback import parse_tool_calls
from rune.messages import thaw
from rune.transport.base import DeltaSink

THOUGHT_MAX_CHARS = 400
#: the schema's name where a server asks for one (OpenAI ``json_schema.name``)
SCHEMA_NAME = "rune_turn"


def turn_schema(specs: Sequence[Any]) -> dict[str, Any]:
    """The JSON schema of one turn: a call of one of ``specs``, or the final answer."""
    thought = {"type": "string", "maxLength": THOUGHT_MAX_CHARS}
    forms: list[dict[str, Any]] = [
        _object(
            {
                "thought": thought,
                "tool": {"type": "string", "enum": [spec.name]},
                "arguments": _closed(thaw(spec.parameters)),
            }
        )
        for spec in specs
    ]
    forms.append(_object({"thought": thought, "answer": {"type": "string"}}))
    return {"anyOf": forms}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameter schema without room for invented arguments; descriptions dropped
    (the grammar ignores them and the prompt already says what each tool does)."""
    schema = {k: v for k, v in schema.items() if k != "description"}
    schema.setdefault("type", "object")
    schema["additionalProperties"] = False
    properties = schema.get("properties")
    if isinstance(properties, dict):
        schema["properties"] = {
            name: {k: v for k, v in prop.items() if k != "description"}
            if isinstance(prop, dict)
            else prop
            for name, prop in properties.items()
        }
    return schema


# --- the prompt ---------------------------------------------------------------------------


def constrained_prompt(specs: Sequence[Any]) -> str:
    """The system block that tells the model the reply format and the tools, compactly."""
    lines = [
        "Reply with exactly one JSON object per turn:",
        '{"thought": "<the code that is wrong, and what it must be instead>", '
        '"tool": "<tool name>", "arguments": {...}} to use a tool, or',
        '{"thought": "...", "answer": "<what you did, for the user>"} when the task is done.',
        "Tools:",
    ]
    lines.extend(f"- {signature(spec)}: {_first_sentence(spec.description)}" for spec in specs)
    example = _example(specs)
    if example:
        lines.extend(["", example])
    return "\n".join(lines)


def signature(spec: Any) -> str:
    """``edit_file(path, old_text, new_text)``; optional arguments get a ``?``."""
    parameters = spec.parameters
    required = set(parameters.get("required", ()))
    names = [n if n in required else f"{n}?" for n in parameters.get("properties", {})]
    return f"{spec.name}({', '.join(names)})"


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


_EXAMPLE_TASK = 'Example. The user says: "greet() in hello.py uses the wrong name"; hello.py holds:'
_EXAMPLE_FILE = 'NAME = "world"\n\n\ndef greet(name):\n    return "Hello, " + NAME\n'
_EXAMPLE_AFTER = {
    "thought": "The change was applied.",
    "answer": "greet() now greets the name it is given.",
}


def _example(specs: Sequence[Any]) -> str | None:
    """One worked fix with the most precise edit tool there is (a copied example should be a
    good one), then the answer that ends the task."""
    names = {spec.name for spec in specs}
    if "replace_function" in names:
        call: dict[str, Any] = {
            "tool": "replace_function",
            "arguments": {
                "path": "hello.py",
                "name": "greet",
                "code": 'def greet(name):\n    return "Hello, " + name\n',
            },
        }
    elif "edit_file" in names:
        call = {
            "tool": "edit_file",
            "arguments": {
                "path": "hello.py",
                "old_text": '    return "Hello, " + NAME',
                "new_text": '    return "Hello, " + name',
            },
        }
    else:
        return None
    first = {"thought": "greet() ignores its name argument and uses NAME.", **call}
    return "\n".join(
        [
            _EXAMPLE_TASK,
            _EXAMPLE_FILE,
            "You reply:",
            json.dumps(first, ensure_ascii=False),
            "and after the result of the tool:",
            json.dumps(_EXAMPLE_AFTER, ensure_ascii=False),
        ]
    )


def format_hint() -> str:
    """The reminder sent back after a reply that could not be used."""
    return (
        'Reply with one JSON object: {"thought": "...", "tool": "<tool name>", '
        '"arguments": {...}} or {"thought": "...", "answer": "..."}.'
    )


# --- reading a turn -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConstrainedCall:
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ConstrainedTurn:
    """One reply read: a call, or an answer, or an error to tell the model about."""

    thought: str = ""
    call: ConstrainedCall | None = None
    answer: str | None = None
    error: str | None = None


def parse_turn(content: str, tool_names: frozenset[str] | set[str]) -> ConstrainedTurn:
    """Read one reply. A server that ignored the schema may have answered in prose: calls in
    it are salvaged with the text-fallback parser, and plain prose is the answer."""
    text = content.strip()
    if not text.startswith("{"):
        salvaged = parse_tool_calls(content, frozenset(tool_names))
        if salvaged.calls:
            first = salvaged.calls[0]
            return ConstrainedTurn(call=ConstrainedCall(first.name, first.arguments))
        if salvaged.error is not None:
            return ConstrainedTurn(error=salvaged.error)
        return ConstrainedTurn(answer=salvaged.visible_text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        cut = err.pos >= len(text) or err.msg.startswith("Unterminated string")
        where = "was cut off" if cut else "is not valid JSON"
        return ConstrainedTurn(error=f"the reply {where} ({err.msg} at character {err.pos + 1})")
    except RecursionError:
        return ConstrainedTurn(error="the reply is nested too deeply")
    if not isinstance(data, dict):
        return ConstrainedTurn(error="the reply is not a JSON object")
    thought = data.get("thought")
    thought = thought if isinstance(thought, str) else ""
    if "tool" in data:
        name = data.get("tool")
        arguments = data.get("arguments", {})
        if not isinstance(name, str) or name not in tool_names:
            known = ", ".join(sorted(tool_names))
            return ConstrainedTurn(thought, error=f"unknown tool {name!r}; the tools are {known}")
        if not isinstance(arguments, dict):
            return ConstrainedTurn(thought, error=f'"arguments" of {name} must be a JSON object')
        return ConstrainedTurn(thought, call=ConstrainedCall(name, arguments))
    answer = data.get("answer")
    if isinstance(answer, str):
        return ConstrainedTurn(thought, answer=answer)
    return ConstrainedTurn(thought, error='the reply has neither "tool" nor "answer"')


class TurnStream:
    """Turns the streamed JSON of a turn into what a person wants to watch: the thought as
    thinking, the answer as text, as they arrive (the arguments of a call are not streamed).

    It relies on the order the grammar enforces: ``thought`` first, then ``tool`` or ``answer``.
    """

    _KEYS = (("thought", ThinkingDelta), ("answer", TextDelta))

    def __init__(self, sink: DeltaSink | None) -> None:
        self._sink = sink
        self._buffer = ""
        self._emitted: dict[str, int] = {}

    def __call__(self, delta: TextDelta | ThinkingDelta) -> None:
        if self._sink is None:
            return
        if isinstance(delta, ThinkingDelta):
            self._sink(delta)
            return
        self._buffer += delta.text
        for key, kind in self._KEYS:
            value = _string_value(self._buffer, key)
            if value is None:
                continue
            shown = self._emitted.get(key, 0)
            if len(value) > shown:
                self._emitted[key] = len(value)
                self._sink(kind(value[shown:]))


def _string_value(buffer: str, key: str) -> str | None:
    """The (possibly still open) string value of top-level ``key``, if the stream reached it.

    Only the first key and the one after ``thought`` are looked at, which is where the grammar
    puts ``thought`` and ``answer``: text inside a call's arguments is never mistaken for them.
    """
    position = 0
    thought_end = None
    if key == "answer":
        thought = _open_string_after(buffer, 0, "thought")
        if thought is None:
            return None
        thought_end = _string_end(buffer, thought)
        if thought_end is None:
            return None
        position = thought_end + 1
    start = _open_string_after(buffer, position, key, comma=thought_end is not None)
    if start is None:
        return None
    end = _string_end(buffer, start)
    raw = buffer[start : len(buffer) if end is None else end]
    return _decode_partial(raw)


def _open_string_after(buffer: str, position: int, key: str, *, comma: bool = False) -> int | None:
    """Index just past the opening quote of ``key``'s string value at ``position``."""
    rest = buffer[position:]
    stripped = rest.lstrip()
    prefix = "," if comma else "{"
    if not stripped.startswith(prefix):
        return None
    after = stripped[1:].lstrip()
    token = f'"{key}"'
    if not after.startswith(token):
        return None
    after_key = after[len(token) :].lstrip()
    if not after_key.startswith(":"):
        return None
    value = after_key[1:].lstrip()
    if not value.startswith('"'):
        return None
    return len(buffer) - len(value) + 1


def _string_end(buffer: str, start: int) -> int | None:
    """Index of the closing quote of the string that starts at ``start``, or None if open."""
    index = start
    while index < len(buffer):
        char = buffer[index]
        if char == "\\":
            index += 2
            continue
        if char == '"':
            return index
        index += 1
    return None


def _decode_partial(raw: str) -> str:
    """Decode JSON string content that may end in the middle of an escape sequence."""
    for cut in range(0, 7):
        candidate = raw[: len(raw) - cut] if cut else raw
        try:
            value = json.loads(f'"{candidate}"')
        except json.JSONDecodeError:
            continue
        return str(value)
    return ""
