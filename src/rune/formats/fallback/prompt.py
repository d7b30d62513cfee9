"""What the runtime says to a model without native tools, and how it writes calls and results.

The prompt is written for small models: one call format shown once as a real, valid call
(a template with placeholders gets copied literally), the tools as name, description and
JSON schema, and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rune.messages import thaw
from rune.tools.spec import ToolSpec

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

_PLACEHOLDER_BY_TYPE: dict[str, Any] = {
    "string": "main.py",
    "integer": 1,
    "number": 1,
    "boolean": True,
    "array": [],
    "object": {},
}


def fallback_prompt(specs: Sequence[ToolSpec]) -> str:
    """The system block that teaches a model without native tools how to call ours."""
    example = _example_call(specs)
    lines = [
        "You can use tools. To use a tool, reply with one tool call and nothing else, "
        "written exactly like this:",
        format_call(*example) if example else expected_format_hint(),
        'Put the tool name in "name" and its arguments as a JSON object in "arguments". '
        "The result comes back in the next message. When you have the answer, reply in plain "
        "text without a tool call.",
        "",
        "Tools:",
    ]
    for spec in specs:
        schema = json.dumps(thaw(spec.parameters), ensure_ascii=False)
        lines.append(f"- {spec.name}: {spec.description}\n  arguments schema: {schema}")
    return "\n".join(lines)


def format_call(name: str, arguments: Mapping[str, Any]) -> str:
    """A call written in exactly the format the prompt asks for."""
    body = json.dumps({"name": name, "arguments": thaw(arguments)}, ensure_ascii=False)
    return f"{CALL_OPEN}{body}{CALL_CLOSE}"


def format_tool_result(name: str, content: str, *, ok: bool) -> str:
    """How a tool result is fed back to a model that has no ``tool`` role."""
    state = "result" if ok else "error"
    return f'<tool_response name="{name}" status="{state}">\n{content}\n</tool_response>'


def expected_format_hint() -> str:
    """The one-line reminder sent back after a call that could not be used."""
    return (
        "Write each tool call exactly as "
        f'{CALL_OPEN}{{"name": "<tool name>", "arguments": {{...}}}}{CALL_CLOSE}'
    )


def _example_call(specs: Sequence[ToolSpec]) -> tuple[str, dict[str, Any]] | None:
    """A valid call of a real tool, preferring a read-only one (an example is often copied)."""
    if not specs:
        return None
    spec = next((s for s in specs if not s.mutating), specs[0])
    properties = spec.parameters.get("properties", {})
    arguments = {
        name: thaw(_PLACEHOLDER_BY_TYPE.get(properties.get(name, {}).get("type", ""), ""))
        for name in spec.parameters.get("required", ())
    }
    return spec.name, arguments
