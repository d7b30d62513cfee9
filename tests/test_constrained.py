"""The constrained tool protocol: schema, prompt, reading a turn, streaming, and the loop on it.

The loop tests use ScriptedTransport for the model; the wire tests send real HTTP to the fake
Ollama and OpenAI-compatible servers and check the structured-output field on the wire.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.openai_server import FakeOpenAIServer, text_reply

from fakes.ollama_server import FakeModel, FakeOllama
from fakes.ollama_server import text_reply as ollama_text
from rune import events as ev
from rune.formats.constrained import (
    TurnStream,
    constrained_prompt,
    parse_turn,
    turn_schema,
)
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.ollama import OllamaChatTransport
from rune.transport.openai_compat import OpenAICompatTransport
from rune.transport.scripted import ScriptedTransport

BROKEN = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TASK = [{"role": "user", "content": "Fix add() in calc.py."}]
NAMES = frozenset({"read_file", "replace_function"})


def turn(**fields: Any) -> dict[str, Any]:
    """A scripted model turn whose content is one constrained JSON object."""
    return {"content": json.dumps(fields)}


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return turn(tool=tool, arguments=arguments)


def answer(text: str) -> dict[str, Any]:
    return turn(answer=text)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(BROKEN)
    return tmp_path


def executor(project: Path) -> ToolExecutor:
    return ToolExecutor(SandboxPolicy.workspace_only(project), project, contain_commands=False)


class Loop:
    def __init__(self, project: Path, turns: list[Any], **kw: Any) -> None:
        self.transport = ScriptedTransport(turns, tools=True)
        self.events: list[ev.LoopEvent] = []
        self.runtime = LocalToolRuntime(
            self.transport,
            executor(project),
            model="m",
            protocol="constrained",
            on_event=self.events.append,
            **kw,
        )


# --- the schema and the prompt ----------------------------------------------------------------


def test_schema_has_one_form_per_tool_and_an_answer(project: Path) -> None:
    specs = executor(project).specs()
    schema = turn_schema(specs)
    forms = schema["anyOf"]
    assert len(forms) == len(specs) + 1
    for spec, form in zip(specs, forms, strict=False):
        assert form["required"] == ["tool", "arguments"]
        assert form["properties"]["tool"] == {"type": "string", "enum": [spec.name]}
        arguments = form["properties"]["arguments"]
        assert arguments["additionalProperties"] is False
        assert set(arguments["properties"]) == set(spec.parameters["properties"])
        assert arguments["required"] == list(spec.parameters["required"])
    assert forms[-1]["required"] == ["answer"]
    assert all(form["additionalProperties"] is False for form in forms)


def test_prompt_lists_every_tool_with_its_arguments_and_a_worked_example(project: Path) -> None:
    prompt = constrained_prompt(executor(project).specs())
    assert "replace_function(path, name, code)" in prompt
    assert "read_file(path, offset?, limit?)" in prompt
    assert "run_command(" in prompt
    replies = []
    for line in prompt.splitlines():
        try:
            replies.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    assert [reply.get("tool") for reply in replies] == ["replace_function", None]
    assert replies[0]["arguments"]["code"].startswith("def greet(name):")


# --- reading one turn ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            '{"tool": "read_file", "arguments": {"path": "a.py"}}',
            ("call", "read_file", {"path": "a.py"}),
        ),
        ('  {"answer": "All fixed."}\n', ("answer", "All fixed.")),
        ('{"tool": "rm_rf", "arguments": {}}', ("error", "unknown tool 'rm_rf'")),
        ('{"tool": "read_file", "arguments": [1]}', ("error", "JSON object")),
        ('{"tool": "read_file", "argu', ("error", "was cut off")),
        ('{"tool": "read_file", "arguments": {"path": "a', ("error", "was cut off")),
        ('{"answer": "x"} trailing', ("error", "not valid JSON")),
        ('{"note": "x"}', ("error", 'neither "tool" nor "answer"')),
        ("[1, 2]", ("answer", "[1, 2]")),
        ("The bug is fixed now.", ("answer", "The bug is fixed now.")),
        (
            '<tool_call>{"name": "read_file", "arguments": {"path": "b.py"}}</tool_call>',
            ("call", "read_file", {"path": "b.py"}),
        ),
        ("[" * 5000, ("answer", "[" * 5000)),
        ("{" * 5000, ("error", "")),
        ("[" * 5000 + "<tool_call>", ("error", "ended inside the tool call")),
    ],
)
def test_parse_turn(content: str, expected: tuple[Any, ...]) -> None:
    parsed = parse_turn(content, NAMES)
    kind = expected[0]
    if kind == "call":
        assert parsed.call is not None and parsed.error is None
        assert (parsed.call.name, dict(parsed.call.arguments)) == expected[1:]
    elif kind == "answer":
        assert parsed.call is None and parsed.answer == expected[1]
    else:
        assert parsed.call is None and parsed.answer is None
        assert parsed.error is not None and expected[1] in parsed.error


def test_stream_shows_the_answer_as_it_arrives() -> None:
    seen: list[Any] = []
    stream = TurnStream(seen.append)
    text = json.dumps({"answer": 'Fixed: add() said "a - b"\n\u00e9 \\ done'})
    for i in range(0, len(text), 3):
        stream(ev.TextDelta(text[i : i + 3]))
    assert all(isinstance(d, ev.TextDelta) for d in seen)
    assert "".join(d.text for d in seen) == 'Fixed: add() said "a - b"\n\u00e9 \\ done'


def test_stream_never_shows_a_calls_arguments_even_when_they_spell_an_answer() -> None:
    seen: list[Any] = []
    stream = TurnStream(seen.append)
    text = json.dumps(
        {
            "tool": "write_file",
            "arguments": {"path": "x.json", "content": '{"answer": "b"}'},
        }
    )
    for char in text:
        stream(ev.TextDelta(char))
    assert seen == []


# --- the loop -----------------------------------------------------------------------------------


def test_a_call_runs_its_result_comes_back_as_text_and_the_answer_ends_the_turn(
    project: Path,
) -> None:
    loop = Loop(project, [call("read_file", path="calc.py"), answer("add() subtracts.")])
    resp = loop.runtime.run(TASK)
    assert resp.success and resp.text == "add() subtracts."
    assert resp.protocol == "constrained"
    assert [(e.name, e.status, e.source) for e in resp.events] == [
        ("read_file", "done", "constrained")
    ]
    first, second = loop.transport.requests
    assert first.tools is None
    assert first.response_schema == turn_schema(executor(project).specs())
    assert (
        first.messages[0]["role"] == "system" and "one JSON object" in first.messages[0]["content"]
    )
    result = second.messages[-1]
    assert result["role"] == "user"
    assert result["content"].startswith('<tool_response name="read_file" status="result">')
    assert "return a - b" in result["content"]
    injected = [e for e in loop.events if isinstance(e, ev.FallbackPromptInjected)]
    assert [e.protocol for e in injected] == ["constrained"]


def test_a_change_pauses_and_is_approved_from_a_new_process(project: Path) -> None:
    fixed = "def add(a, b):\n    return a + b\n"
    loop = Loop(project, [call("replace_function", path="calc.py", name="add", code=fixed)])
    paused = loop.runtime.run(TASK)
    assert paused.paused and paused.pending is not None
    assert paused.pending.name == "replace_function"
    assert "+    return a + b" in paused.pending.preview
    script = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.scripted import ScriptedTransport
ws = {str(project)!r}
turn = {{"content": json.dumps({{"answer": "fixed"}})}}
rt = LocalToolRuntime(ScriptedTransport([turn]), ToolExecutor(SandboxPolicy.workspace_only(ws),
    ws, contain_commands=False), model="m", protocol="constrained")
resp = rt.approve(json.loads(sys.stdin.read()))
print(json.dumps([resp.success, resp.text, resp.protocol, resp.iterations_used]))
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(paused.pending_state),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == [True, "fixed", "constrained", 2]
    assert (project / "calc.py").read_text() == BROKEN.replace("a - b", "a + b")


def test_an_unusable_reply_is_fed_back_and_two_in_a_row_trip_the_breaker(project: Path) -> None:
    cut = {"content": '{"tool": "read_file", "arguments": {"pa'}
    loop = Loop(project, [cut, cut])
    resp = loop.runtime.run(TASK)
    assert not resp.success and resp.error_kind == "CircuitBreaker"
    assert resp.iterations_used == 2
    feedback = loop.transport.requests[1].messages[-1]
    assert feedback["role"] == "user" and feedback["content"].startswith(
        "Your reply could not be used: the reply was cut off"
    )


def test_identical_failing_calls_trip_the_breaker_as_in_every_protocol(project: Path) -> None:
    missing = call("read_file", path="nope.py")
    resp = Loop(project, [missing, missing, answer("never")]).runtime.run(TASK)
    assert resp.error_kind == "CircuitBreaker"
    assert resp.error is not None and resp.error.startswith("tool read_file failed 2 consecutive")


def test_a_saved_conversation_ending_in_an_unanswered_call_runs_it_first(project: Path) -> None:
    history = [*TASK, {"role": "assistant", **call("read_file", path="calc.py")}]
    loop = Loop(project, [answer("read it")])
    resp = loop.runtime.run(history)
    assert resp.success and [e.name for e in resp.events] == ["read_file"]


def test_protocol_is_checked_at_construction(project: Path) -> None:
    with pytest.raises(ValueError, match="protocol must be one of"):
        LocalToolRuntime(ScriptedTransport([]), executor(project), model="m", protocol="json")


# --- on the wire ----------------------------------------------------------------------------------


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def test_openai_transport_sends_response_format_json_schema(
    openai_server: FakeOpenAIServer, project: Path
) -> None:
    openai_server.script(text_reply('{"answ', 'er": "ok"}'))
    transport = OpenAICompatTransport(openai_server.base_url, read_timeout=5)
    rt = LocalToolRuntime(transport, executor(project), model="m", protocol="constrained")
    resp = rt.run(TASK)
    assert resp.success and resp.text == "ok"
    body = openai_server.chat_bodies[-1]
    assert "tools" not in body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "rune_turn",
            "strict": True,
            "schema": turn_schema(executor(project).specs()),
        },
    }


def test_ollama_transport_sends_the_schema_as_format(project: Path) -> None:
    with FakeOllama([FakeModel("small:latest", ("completion",))]) as ollama:
        ollama.script(ollama_text('{"answer": "ok"}'))
        transport = OllamaChatTransport(ollama.url, read_timeout=5)
        rt = LocalToolRuntime(transport, executor(project), model="small", protocol="constrained")
        resp = rt.run(TASK)
        body = ollama.bodies()[-1]
    assert resp.success and resp.text == "ok"
    assert body["format"] == turn_schema(executor(project).specs())
    assert "tools" not in body


# --- what the model meant -----------------------------------------------------------------------


WORDS = "import re\n\n\ndef title(s):\n    return s\n"
#: as a model writes it inside a JSON string: the regex's \b as JSON's own \b escape
MEANT = "def title(s):\n    return re.sub(r'\x08(\\w)', lambda m: m.group(1).upper(), s)\n"


def test_a_regex_backslash_b_written_as_json_backspace_is_the_regex(project: Path) -> None:
    """The 1.5B wrote re.sub(r'(\\b(...' in a JSON string: a backspace, and the change was
    refused for a control character. No tool takes one; the model meant the backslash."""
    (project / "words.py").write_text(WORDS)
    reply = json.dumps(
        {
            "tool": "replace_function",
            "arguments": {"path": "words.py", "name": "title", "code": MEANT},
        }
    )
    assert "\\b(\\\\w)" in reply  # JSON's \b, and an escaped backslash before w
    loop = Loop(project, [{"content": reply}, answer("title() capitalises words.")])
    response = loop.runtime.run(TASK)
    while response.pending is not None:
        response = loop.runtime.approve(response.pending_state)
    assert response.success
    written = (project / "words.py").read_text()
    assert "re.sub(r'\\b(\\w)', " in written and "\x08" not in written
    words = subprocess.run(
        [sys.executable, "-c", "import words; print(words.title('active record'))"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert words.stdout.strip() == "Active Record"
