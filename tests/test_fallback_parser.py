"""The text-fallback prompt and parser, one format and one false-positive class at a time."""

from __future__ import annotations

import json
import re

import pytest

from rune.formats.fallback import (
    CALL_CLOSE,
    CALL_OPEN,
    expected_format_hint,
    fallback_prompt,
    format_call,
    format_tool_result,
    parse_tool_calls,
    strip_thinking,
)
from rune.tools.executor import ToolExecutor
from rune.tools.spec import ToolSpec

KNOWN = frozenset({"read_file", "write_file", "list_dir"})


def calls_of(text: str, known: frozenset[str] = KNOWN) -> list[tuple[str, dict[str, object]]]:
    outcome = parse_tool_calls(text, known)
    assert outcome.error is None, outcome.error
    return [(c.name, c.arguments) for c in outcome.calls]


def error_of(text: str, known: frozenset[str] = KNOWN) -> str:
    outcome = parse_tool_calls(text, known)
    assert outcome.calls == ()
    assert outcome.error is not None
    return outcome.error


# --- the prompt ------------------------------------------------------------------------------


def test_prompt_lists_every_tool_with_description_and_schema(tmp_path) -> None:
    specs = ToolExecutor(workspace=tmp_path).specs()
    prompt = fallback_prompt(specs)
    for spec in specs:
        line = next(line for line in prompt.splitlines() if line.startswith(f"- {spec.name}:"))
        assert spec.description in line
        schema_line = prompt.splitlines()[prompt.splitlines().index(line) + 1]
        schema = json.loads(schema_line.split("arguments schema:", 1)[1])
        assert schema == json.loads(json.dumps(dict(spec.parameters)))


def test_prompt_example_is_a_real_call_of_a_read_only_tool(tmp_path) -> None:
    specs = ToolExecutor(workspace=tmp_path).specs()
    prompt = fallback_prompt(specs)
    example = next(line for line in prompt.splitlines() if line.startswith(CALL_OPEN))
    # The prompt shows one exact format, once.
    assert prompt.count(CALL_OPEN) == 1
    names = {s.name for s in specs}
    [(name, arguments)] = calls_of(example, frozenset(names))
    spec = next(s for s in specs if s.name == name)
    assert not spec.mutating
    assert set(spec.parameters["required"]) <= set(arguments)


def test_prompt_example_falls_back_to_a_mutating_tool_and_fills_required_types() -> None:
    spec = ToolSpec(
        "set_flag",
        "Set a flag.",
        {
            "type": "object",
            "properties": {"count": {"type": "integer"}, "on": {"type": "boolean"}},
            "required": ["count", "on"],
        },
        mutating=True,
    )
    example = next(
        line for line in fallback_prompt([spec]).splitlines() if line.startswith(CALL_OPEN)
    )
    [(name, arguments)] = calls_of(example, frozenset({"set_flag"}))
    assert name == "set_flag"
    assert isinstance(arguments["count"], int) and isinstance(arguments["on"], bool)


def test_prompt_without_tools_still_states_the_format() -> None:
    assert expected_format_hint() in fallback_prompt([])


def test_prompt_instructions_stay_short_for_small_models(tmp_path) -> None:
    prompt = fallback_prompt(ToolExecutor(workspace=tmp_path).specs())
    instructions = prompt.split("Tools:")[0]
    assert len(instructions.split()) < 90


def test_format_call_and_tool_result() -> None:
    text = format_call("read_file", {"path": "ü.py"})
    assert text.startswith(CALL_OPEN) and text.endswith(CALL_CLOSE)
    assert "ü.py" in text
    assert calls_of(text) == [("read_file", {"path": "ü.py"})]
    result = format_tool_result("read_file", "line 1", ok=True)
    assert 'name="read_file"' in result and 'status="result"' in result and "line 1" in result
    assert 'status="error"' in format_tool_result("read_file", "boom", ok=False)


# --- accepted formats ------------------------------------------------------------------------

READ = {"path": "main.py"}
READ_JSON = json.dumps({"name": "read_file", "arguments": READ})


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(f"<tool_call>{READ_JSON}</tool_call>", id="prompt-format"),
        pytest.param(f"<tool_call>\n{READ_JSON}\n</tool_call>", id="hermes"),
        pytest.param(f"<tool_call>\n{READ_JSON}", id="hermes-unclosed"),
        pytest.param(f"<tool_call>\n```json\n{READ_JSON}\n```\n</tool_call>", id="fence-in-tag"),
        pytest.param(f"```json\n{READ_JSON}\n```", id="fenced-json"),
        pytest.param(f"```\n{READ_JSON}\n```", id="fenced-plain"),
        pytest.param(READ_JSON, id="bare"),
        pytest.param('{"name": "read_file", "arguments": "{\\"path\\": \\"main.py\\"}"}', id="s"),
        pytest.param('{"name": "read_file", "parameters": {"path": "main.py"}}', id="llama"),
        pytest.param(f"[TOOL_CALLS][{READ_JSON}]", id="mistral-list"),
        pytest.param('[TOOL_CALLS]read_file[ARGS]{"path": "main.py"}', id="mistral-named"),
        pytest.param(f"I'll look first.\n{READ_JSON}\nThen I decide.", id="prose-around-bare"),
        pytest.param(f"Checking.\n<tool_call>{READ_JSON}</tool_call>\nOK?", id="prose-around-tag"),
        pytest.param(f"<tool_call><tool_call>{READ_JSON}</tool_call>", id="doubled-opener"),
    ],
)
def test_each_accepted_format_yields_the_call(reply: str) -> None:
    assert calls_of(reply) == [("read_file", READ)]


def test_several_calls_come_back_in_order() -> None:
    reply = (
        '<tool_call>{"name": "list_dir", "arguments": {"path": "src"}}</tool_call>\n'
        "and then\n"
        '```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```\n'
        '[TOOL_CALLS][{"name": "read_file", "arguments": {"path": "b"}}]'
    )
    assert calls_of(reply) == [
        ("list_dir", {"path": "src"}),
        ("read_file", {"path": "a"}),
        ("read_file", {"path": "b"}),
    ]


def test_braces_quotes_newlines_and_tags_inside_arguments_survive() -> None:
    content = 'def f():\n    return {"}": "{"}\n</tool_call><think>```'
    reply = (
        "<tool_call>"
        + json.dumps({"name": "write_file", "arguments": {"path": "a.py", "content": content}})
        + "</tool_call>"
    )
    assert calls_of(reply) == [("write_file", {"path": "a.py", "content": content})]


def test_raw_newlines_inside_strings_are_accepted() -> None:
    reply = '{"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\ny = 2\n"}}'
    assert calls_of(reply) == [("write_file", {"path": "a.py", "content": "x = 1\ny = 2\n"})]


# --- repairs, only when unambiguous ----------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(
            '<tool_call>{"name": "read_file", "arguments": {"path": "main.py",},}', id="c"
        ),
        pytest.param("<tool_call>{'name': 'read_file', 'arguments': {'path': 'main.py'}}", id="q"),
        pytest.param('<tool_call>{"name": "read_file", "arguments": {"path": "main.py"}', id="b"),
        pytest.param('{"name": "read_file", "arguments": {"path": "main.py"}', id="bare-brace"),
        pytest.param('<tool_call>{"name": "read_file", "arguments": {"path": "main.py"', id="bb"),
    ],
)
def test_mild_damage_is_repaired(reply: str) -> None:
    assert calls_of(reply) == [("read_file", READ)]


def test_invalid_escape_is_kept_as_a_literal_backslash() -> None:
    reply = '<tool_call>{"name": "write_file", "arguments": {"path": "r", "content": "\\d+"}}'
    assert calls_of(reply) == [("write_file", {"path": "r", "content": "\\d+"})]


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("<tool_call>{'name': 'write_file', 'arguments': {'content': 'it's'}}", "quote"),
        ('<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": "x(', "incomp"),
        ('<tool_call>{"name": "write_file", "arguments": {"path": "a", "content":', "incomp"),
        ('<tool_call>{"name": "read_file", "arguments": {"path": "a"}}}}}', None),
        ('{"name": "read_file", "arguments": {"path": "main.py"} and more', "JSON"),
    ],
)
def test_ambiguous_damage_is_an_error_not_a_guess(reply: str, says: str | None) -> None:
    outcome = parse_tool_calls(reply, KNOWN)
    if says is None:  # extra closing braces after a complete call: the call stands
        assert [c.name for c in outcome.calls] == ["read_file"]
        return
    assert outcome.calls == ()
    assert outcome.error is not None and says in outcome.error


# --- errors for replies that try to call -----------------------------------------------------


def test_unknown_tool_in_tags_lists_the_valid_ones() -> None:
    error = error_of('<tool_call>{"name": "delete_file", "arguments": {}}</tool_call>')
    assert "delete_file" in error
    assert "list_dir, read_file, write_file" in error


def test_unknown_tool_standing_alone_is_an_error_but_inside_prose_is_not_a_call() -> None:
    alone = '{"name": "shell", "arguments": {"cmd": "ls"}}'
    assert "valid tools" in error_of(alone)
    assert "valid tools" in error_of(f"```json\n{alone}\n```")
    prose = f"Some APIs return {alone} when they pick a function."
    outcome = parse_tool_calls(prose, KNOWN)
    assert outcome.calls == () and outcome.error is None


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ('<tool_call>{"name": "read_file", "arguments": {"path": a}}</tool_call>', "not valid"),
        ("<tool_call></tool_call>", "empty"),
        ("Reading now.\n<tool_call>", "ended inside"),
        ("<tool_call>read_file main.py</tool_call>", "JSON object"),
        ("[TOOL_CALLS] read main.py", "JSON list"),
        ('<tool_call>{"name": "read_file", "arguments": "main.py"}</tool_call>', "string"),
        ('<tool_call>{"name": "read_file", "arguments": ["a"]}</tool_call>', "JSON object"),
        ('<tool_call>{"arguments": {"path": "a"}}</tool_call>', '"name"'),
    ],
)
def test_failed_attempts_say_what_was_wrong(reply: str, says: str) -> None:
    assert says in error_of(reply)


def test_one_broken_call_voids_the_whole_reply() -> None:
    reply = (
        f"<tool_call>{READ_JSON}</tool_call>\n"
        '<tool_call>{"name": "list_dir", "arguments": {path: "src"}}</tool_call>'
    )
    assert "not valid JSON" in error_of(reply)


def test_error_messages_are_short() -> None:
    huge = "x" * 5000
    error = error_of('<tool_call>{"name": "write_file", "arguments": {"content": "' + huge)
    assert len(error) < 200


# --- false positives -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("Use read_file to read and write_file to write.", id="mention"),
        pytest.param(f"For example: {READ_JSON}", id="example-cue"),
        pytest.param(f"Tools take JSON, e.g. {READ_JSON}.", id="eg-cue"),
        pytest.param(f"Here is an example:\n```json\n{READ_JSON}\n```", id="example-fenced"),
        pytest.param(f"```python\nrequest = {READ_JSON}\n```", id="python-fence"),
        pytest.param(f"```js\nconst s = `<tool_call>{READ_JSON}</tool_call>`;\n```", id="js-tag"),
        pytest.param('The record {"name": "Alice", "age": 3} is valid.', id="data-object"),
        pytest.param('{"name": "read_file", "description": "d", "parameters": {}}', id="schema"),
        pytest.param('{"name": "read_file"}', id="no-arguments"),
        pytest.param('{"examples": [' + READ_JSON + "]}", id="nested"),
        pytest.param('{"name": "read_file", "arguments": {}, "result": "ok"}', id="extra-key"),
        pytest.param('{"type": "object", "name": "read_file", "parameters": {}}', id="type"),
        pytest.param("[1, 2] and {braces} and [a link](x)", id="brackets"),
    ],
)
def test_not_a_call(reply: str) -> None:
    outcome = parse_tool_calls(reply, KNOWN)
    assert outcome.calls == () and outcome.error is None
    assert not outcome.attempted
    assert outcome.visible_text == reply.strip()


# --- thinking --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(f"<think>{CALL_OPEN}{READ_JSON}{CALL_CLOSE}</think>Done.", id="closed"),
        pytest.param(f"<think>maybe {CALL_OPEN}{READ_JSON}{CALL_CLOSE}", id="unclosed"),
        pytest.param(f"{CALL_OPEN}{READ_JSON}{CALL_CLOSE} no wait</think>Done.", id="lone-close"),
    ],
)
def test_thinking_is_never_parsed(reply: str) -> None:
    outcome = parse_tool_calls(reply, KNOWN)
    assert outcome.calls == () and outcome.error is None
    assert "read_file" in outcome.thinking
    assert "read_file" not in outcome.visible_text


def test_a_call_after_thinking_is_found_and_thinking_is_set_aside() -> None:
    reply = '<think>not {"name": "list_dir", "arguments": {}}</think>\n' + format_call(
        "read_file", READ
    )
    outcome = parse_tool_calls(reply, KNOWN)
    assert [(c.name, c.arguments) for c in outcome.calls] == [("read_file", READ)]
    assert "list_dir" in outcome.thinking
    assert strip_thinking(reply) == format_call("read_file", READ)


def test_strip_thinking_keeps_think_tags_inside_call_arguments() -> None:
    call = format_call("write_file", {"path": "t", "content": "<think>keep</think>"})
    assert strip_thinking(f"<think>drop</think>{call}") == call


# --- what is left of the reply ---------------------------------------------------------------


def test_visible_text_is_the_prose_without_calls_and_fences() -> None:
    reply = f"Let me look.\n```json\n{READ_JSON}\n```\nBack soon."
    outcome = parse_tool_calls(reply, KNOWN)
    assert outcome.attempted
    assert re.sub(r"\s+", " ", outcome.visible_text) == "Let me look. Back soon."


def test_a_fabricated_tool_response_and_everything_after_it_is_ignored() -> None:
    reply = (
        f"{format_call('read_file', READ)}\n"
        '<tool_response>{"ok": true}</tool_response>\n'
        f"{format_call('list_dir', {'path': '.'})}"
    )
    outcome = parse_tool_calls(reply, KNOWN)
    assert [c.name for c in outcome.calls] == ["read_file"]
    assert "tool_response" not in outcome.visible_text


def test_the_format_of_each_call_is_recorded() -> None:
    reply = (
        f"{format_call('read_file', READ)}\n[TOOL_CALLS]list_dir[ARGS]{{}}\n"
        '{"name": "list_dir", "parameters": {"path": "x"}}'
    )
    formats = [c.format for c in parse_tool_calls(reply, KNOWN).calls]
    assert formats == ["tagged", "mistral", "json"]
