"""Any arguments object, written the way the prompt (or Hermes, or a ```json fence) writes it,
parses back to the same object — including strings full of braces, quotes, tags and fences."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rune.formats.fallback import format_call, parse_tool_calls

KNOWN = ("read_file", "write_file", "edit_file")

# Strings that would break a parser that looks for delimiters instead of decoding JSON.
NASTY = st.sampled_from(
    [
        "{",
        "}",
        "[",
        "]",
        '"',
        "'",
        "\\",
        "\n",
        "```",
        "```json\n",
        "<tool_call>",
        "</tool_call>",
        "<think>",
        "</think>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "<tool_response>",
        '{"name": "read_file", "arguments": {}}',
        "for example",
    ]
)
STRINGS = st.lists(st.one_of(st.text(max_size=8), NASTY), max_size=6).map("".join)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    STRINGS,
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(STRINGS, children, max_size=4)
    ),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(STRINGS, VALUES, max_size=4)
NAMES = st.sampled_from(KNOWN)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parsed_back(reply: str) -> list[tuple[str, dict[str, Any]]]:
    outcome = parse_tool_calls(reply, KNOWN)
    assert outcome.error is None, outcome.error
    return [(c.name, c.arguments) for c in outcome.calls]


def call_json(name: str, arguments: dict[str, Any], **dumps: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, **dumps)


@PROPERTY
@given(NAMES, ARGUMENTS)
def test_prompt_format_round_trips(name: str, arguments: dict[str, Any]) -> None:
    assert parsed_back(format_call(name, arguments)) == [(name, arguments)]


@PROPERTY
@given(NAMES, ARGUMENTS, st.sampled_from(["", "Let me do that.\n", "Step 1:\n\n"]))
def test_hermes_form_round_trips(name: str, arguments: dict[str, Any], before: str) -> None:
    reply = f"{before}<tool_call>\n{call_json(name, arguments, indent=2)}\n</tool_call>\nDone."
    assert parsed_back(reply) == [(name, arguments)]


@PROPERTY
@given(NAMES, ARGUMENTS, st.sampled_from(["", "Reading it.\n", "Now:\n\n"]))
def test_json_fence_round_trips(name: str, arguments: dict[str, Any], before: str) -> None:
    reply = f"{before}```json\n{call_json(name, arguments)}\n```\nThen I continue."
    assert parsed_back(reply) == [(name, arguments)]


@PROPERTY
@given(NAMES, ARGUMENTS)
def test_arguments_as_a_json_string_round_trip(name: str, arguments: dict[str, Any]) -> None:
    reply = json.dumps({"name": name, "arguments": json.dumps(arguments)})
    assert parsed_back(reply) == [(name, arguments)]


@PROPERTY
@given(st.lists(st.tuples(NAMES, ARGUMENTS), min_size=1, max_size=4))
def test_several_calls_round_trip_in_order(calls: list[tuple[str, dict[str, Any]]]) -> None:
    reply = "\n".join(f"Next:\n{format_call(name, arguments)}" for name, arguments in calls)
    assert parsed_back(reply) == calls
