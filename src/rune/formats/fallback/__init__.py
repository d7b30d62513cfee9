"""The runtime-owned text-fallback tool protocol: the prompt, and the parser of replies.

Used for models without native tool calling, and to salvage calls that a tools-capable
model wrote into ``content`` instead of ``tool_calls``.
"""

from rune.formats.fallback.parser import ParsedCall, ParseOutcome, parse_tool_calls, strip_thinking
from rune.formats.fallback.prompt import (
    CALL_CLOSE,
    CALL_OPEN,
    expected_format_hint,
    fallback_prompt,
    format_call,
    format_tool_result,
)

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "ParseOutcome",
    "ParsedCall",
    "expected_format_hint",
    "fallback_prompt",
    "format_call",
    "format_tool_result",
    "parse_tool_calls",
    "strip_thinking",
]
