"""The constrained tool protocol: every model turn is one JSON object the server's grammar allows.

For models that cannot be trusted to call tools natively (small ones, or a server whose native
calls come back as prose), Rune asks the server for structured output (OpenAI
``response_format`` json_schema, Ollama ``format``) constrained to::

    {"tool": "<name>", "arguments": {<that tool's schema>}}
  | {"answer": "..."}

built from the real tool schemas, so every reply parses and names a real tool with arguments of
the right shape. There is no "thought" field: on the task suite a small model's thoughts inside
JSON only restated the task, and cost it seconds per turn (``bench/README.md``). A tool call
becomes a ``ToolRequest(source="constrained")``; an answer ends the
turn. Results go back as text, as in the text-fallback protocol. The loop semantics (dedup,
breaker, budget, approvals, pending state) are the loop's, unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rune.events import TextDelta, ThinkingDelta
from rune.formats.fallback import parse_tool_calls
from rune.messages import thaw
from rune.transport.base import DeltaSink

#: the schema's name where a server asks for one (OpenAI ``json_schema.name``)
SCHEMA_NAME = "rune_turn"


def turn_schema(specs: Sequence[Any], *, answer: bool = True) -> dict[str, Any]:
    """The JSON schema of one turn: a call of one of ``specs``, or the final answer."""
    forms: list[dict[str, Any]] = [
        _object(
            {
                "tool": {"type": "string", "enum": [spec.name]},
                "arguments": _closed(thaw(spec.parameters)),
            }
        )
        for spec in specs
    ]
    if answer:
        forms.append(_object({"answer": {"type": "string"}}))
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
        '{"tool": "<tool name>", "arguments": {...}} to use a tool, or',
        '{"answer": "<what you did, for the user>"} when the task is done.',
        "Tools:",
    ]
    checks = [spec.name for spec in specs if getattr(spec, "checks", False)]
    if checks:
        lines.insert(
            3, f"After a change, check it with {checks[0]}: assert what the task says it should do."
        )
    lines.extend(tool_lines(specs))
    example = _example(specs, checks[0] if checks else None)
    if example:
        lines.extend(["", example])
    return "\n".join(lines)


def tool_lines(specs: Sequence[Any]) -> list[str]:
    """A line per tool: its signature and the first sentence of what it does."""
    return [f"- {signature(spec)}: {_first_sentence(spec.description)}" for spec in specs]


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
_EXAMPLE_CHECK_CODE = "from hello import greet\nassert greet('Ada') == 'Hello, Ada', greet('Ada')"
_EXAMPLE_AFTER = {"answer": "greet() now greets the name it is given."}


def _example(specs: Sequence[Any], check_tool: str | None) -> str | None:
    """One worked fix with the most precise edit tool there is (a copied example should be a
    good one), its check when there is a check tool, then the answer that ends the task."""
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
    lines = [_EXAMPLE_TASK, _EXAMPLE_FILE, "You reply:", json.dumps(call, ensure_ascii=False)]
    if check_tool is not None:
        check = {"tool": check_tool, "arguments": {"code": _EXAMPLE_CHECK_CODE}}
        lines += ["then, to check the change:", json.dumps(check, ensure_ascii=False)]
        lines += ["and when the check passes:"]
    else:
        lines += ["and after the result of the tool:"]
    lines.append(json.dumps(_EXAMPLE_AFTER, ensure_ascii=False))
    return "\n".join(lines)


def format_hint() -> str:
    """The reminder sent back after a reply that could not be used."""
    return (
        'Reply with one JSON object: {"tool": "<tool name>", "arguments": {...}} or '
        '{"answer": "..."}.'
    )


def reply(call: ConstrainedCall) -> str:
    """The reply that makes ``call``, as the model writes one."""
    return json.dumps({"tool": call.name, "arguments": thaw(call.arguments)}, ensure_ascii=False)


# --- reading a turn -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConstrainedCall:
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ConstrainedTurn:
    """One reply read: a call, or an answer, or an error to tell the model about."""

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
    if "tool" in data:
        name = data.get("tool")
        arguments = data.get("arguments", {})
        if not isinstance(name, str) or name not in tool_names:
            known = ", ".join(sorted(tool_names))
            return ConstrainedTurn(error=f"unknown tool {name!r}; the tools are {known}")
        if not isinstance(arguments, dict):
            return ConstrainedTurn(error=f'"arguments" of {name} must be a JSON object')
        return ConstrainedTurn(call=ConstrainedCall(name, arguments))
    answer = data.get("answer")
    if isinstance(answer, str):
        return ConstrainedTurn(answer=answer)
    return ConstrainedTurn(error='the reply has neither "tool" nor "answer"')


class TurnStream:
    """Turns the streamed JSON of a turn into what a person wants to watch: the answer, as it
    arrives (the arguments of a call are not streamed).

    It relies on what the grammar enforces: an answer is the only key of its object.
    """

    def __init__(self, sink: DeltaSink | None) -> None:
        self._sink = sink
        self._buffer = ""
        self._shown = 0

    def __call__(self, delta: TextDelta | ThinkingDelta) -> None:
        if self._sink is None:
            return
        if isinstance(delta, ThinkingDelta):
            self._sink(delta)
            return
        self._buffer += delta.text
        value = _answer_so_far(self._buffer)
        if value is not None and len(value) > self._shown:
            self._sink(TextDelta(value[self._shown :]))
            self._shown = len(value)


_ANSWER_OPENING = re.compile(r'\s*\{\s*"answer"\s*:\s*"')


def _answer_so_far(buffer: str) -> str | None:
    """The (possibly still open) answer string, when the reply is an answer; else None."""
    opening = _ANSWER_OPENING.match(buffer)
    if opening is None:
        return None
    start = opening.end()
    end = _string_end(buffer, start)
    return _decode_partial(buffer[start : len(buffer) if end is None else end])


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
