"""The runtime-owned text-fallback tool protocol: the prompt, and the parser of replies.

Used for models without native tool calling, and to salvage calls that a tools-capable
model wrote into ``content`` instead of ``tool_calls``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rune.messages import thaw
from rune.tools.spec import ToolSpec

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"


def fallback_prompt(specs: Sequence[ToolSpec]) -> str:
    """The system block that teaches a model without native tools how to call ours."""
    lines = [
        "You can use tools. To call one, reply with exactly this and nothing after it:",
        f'{CALL_OPEN}{{"name": "<tool name>", "arguments": {{<arguments as JSON>}}}}{CALL_CLOSE}',
        "Example:",
        f'{CALL_OPEN}{{"name": "read_file", "arguments": {{"path": "main.py"}}}}{CALL_CLOSE}',
        "After a call, wait: the result comes back in the next message. When you are done, "
        "answer in plain text without any tool call.",
        "Tools:",
    ]
    for spec in specs:
        schema = json.dumps(thaw(spec.parameters), sort_keys=True)
        lines.append(f"- {spec.name}: {spec.description} Arguments schema: {schema}")
    return "\n".join(lines)


def format_call(name: str, arguments: Mapping[str, Any]) -> str:
    """A call written in exactly the format the prompt asks for."""
    body = json.dumps({"name": name, "arguments": thaw(arguments)}, ensure_ascii=False)
    return f"{CALL_OPEN}{body}{CALL_CLOSE}"


def format_tool_result(name: str, content: str, *, ok: bool) -> str:
    """How a tool result is fed back to a model that has no ``tool`` role."""
    state = "result" if ok else "error"
    return f'<tool_response name="{name}" status="{state}">\n{content}\n</tool_response>'


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParseOutcome:
    """Calls found in a reply, in order; ``error`` when the reply tried to call and failed."""

    calls: tuple[ParsedCall, ...] = ()
    error: str | None = None
    visible_text: str = ""
    attempted: bool = field(default=False)


_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_TAGGED = re.compile(
    re.escape(CALL_OPEN) + r"(.*?)(?:" + re.escape(CALL_CLOSE) + r"|\Z)", re.DOTALL
)


def strip_thinking(text: str) -> str:
    return _THINK.sub("", text)


def parse_tool_calls(text: str, known_tools: Collection[str]) -> ParseOutcome:
    """Find tool calls in ``text``. Thinking (``<think>…</think>``) is never parsed."""
    visible = strip_thinking(text)
    calls: list[ParsedCall] = []
    bodies = _TAGGED.findall(visible)
    for body in bodies:
        try:
            obj = json.loads(body.strip())
        except json.JSONDecodeError as err:
            return ParseOutcome(
                error=f"the tool call is not valid JSON ({err.msg})",
                visible_text=visible,
                attempted=True,
            )
        call = _as_call(obj)
        if call is None:
            return ParseOutcome(
                error='a tool call needs "name" and "arguments"',
                visible_text=visible,
                attempted=True,
            )
        if call.name not in known_tools:
            return ParseOutcome(
                error=f"unknown tool {call.name!r}; valid tools: {', '.join(sorted(known_tools))}",
                visible_text=visible,
                attempted=True,
            )
        calls.append(call)
    text_only = _TAGGED.sub("", visible).strip()
    return ParseOutcome(calls=tuple(calls), visible_text=text_only, attempted=bool(bodies))


def _as_call(obj: Any) -> ParsedCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    return ParsedCall(obj["name"], args)


def expected_format_hint() -> str:
    return (
        "Write exactly one call per tool as "
        f'{CALL_OPEN}{{"name": "<tool name>", "arguments": {{...}}}}{CALL_CLOSE}'
    )
