"""Plain Python when a change's code does not parse (rune.assists.valid): the model's JSON string
broke the code, not the change, so the model is asked once for the same definition in a fenced
block, and that takes the call's place when it parses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.test_rewrite import rewrite_requests
from tests.test_test_driven import approve_all, executor, turn

from rune.assists import standard_assists
from rune.errors import InvalidCode
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.python_code import replace_definition
from rune.transport.scripted import ScriptedTransport

SOURCE = (
    "def indent(text, margin, newline='\\n'):\n"
    '    """Every line of ``text`` with ``margin`` before it."""\n'
    "    return newline.join(line for line in text.splitlines())\n"
)
# what the 1.5B meant, and what it sent: JSON's "\n" inside the quotes is a line break there
MEANT = (
    "def indent(text, margin, newline='\\n'):\n"
    '    """Every line of ``text`` with ``margin`` before it."""\n'
    "    return newline.join(margin + line for line in text.splitlines())\n"
)
SENT = MEANT.replace("'\\n'", "'\n'")
TASK = "indent in text.py leaves out the margin. Fix it."


def change(code: str) -> dict[str, Any]:
    arguments = {"path": "text.py", "name": "indent", "code": code}
    return turn(tool="replace_function", arguments=arguments)


def block(code: str) -> dict[str, Any]:
    """The model's plain reply: prose, then the definition in a fenced block."""
    return {"content": f"Here it is as valid Python:\n\n```python\n{code}```\n"}


def run(ws: Path, script: list[dict[str, Any]]) -> tuple[Any, ScriptedTransport]:
    # the model's own check and the rewrite are left out: these tests are about the code alone
    assists = standard_assists(without=frozenset({"check", "repair", "again", "rewrite"}))
    transport = ScriptedTransport(script)
    loop = LocalToolRuntime(
        transport, executor(ws), model="m", protocol="constrained", assists=assists
    )
    return approve_all(loop, loop.run([{"role": "user", "content": TASK}])), transport


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "text.py").write_text(SOURCE)
    return path


def test_code_that_does_not_parse_is_a_typed_error_with_what_was_sent() -> None:
    with pytest.raises(InvalidCode) as caught:
        replace_definition(Path("text.py"), SOURCE, "indent", SENT)
    assert caught.value.code == SENT
    assert "unterminated string literal" in caught.value.problem
    assert "not valid Python on its own" in str(caught.value)  # what the model reads


def test_a_change_whose_string_broke_is_asked_for_as_plain_python(ws: Path) -> None:
    resp, transport = run(ws, [change(SENT), block(MEANT), turn(answer="indent adds it now.")])
    assert resp.success, resp.error
    assert (ws / "text.py").read_text() == MEANT  # the change the model meant
    assert rewrite_requests(transport) == [1]
    asked = str(transport.requests[1].messages[0]["content"])
    assert SENT.rstrip() in asked  # the code as it arrived...
    assert "unterminated string literal" in asked  # ...and why it does not parse
    made = [e for e in resp.events if e.name == "replace_function"]
    assert [(e.status, e.arguments["code"]) for e in made] == [("done", MEANT)]
    assert any("not valid Python" in w and "plain Python" in w for w in resp.warnings)
    # the model reads the plain definition as its own reply
    replies = [str(m.get("content")) for m in resp.messages if m["role"] == "assistant"]
    assert "margin + line" in replies[0] and "'\\\\n'" in replies[0]


def test_a_plain_reply_that_does_not_parse_either_leaves_the_call_as_it_was(ws: Path) -> None:
    resp, transport = run(
        ws,
        [
            change(SENT),
            block("def indent(text, margin:\n    return text\n"),
            change(MEANT.replace("margin + ", "margin+")),  # the model read why: it parses
        ],
    )
    assert rewrite_requests(transport) == [1]
    made = [e for e in resp.events if e.name == "replace_function"]
    assert [e.status for e in made] == ["failed", "done"]
    assert "not valid Python on its own" in str(made[0].error)  # the model read why
    assert made[0].arguments["code"] == SENT


def test_the_plain_request_is_made_once_per_function_and_run(ws: Path) -> None:
    resp, transport = run(ws, [change(SENT), block("def indent(:\n"), change(SENT)])
    assert rewrite_requests(transport) == [1]
    # the same failing call twice: the breaker ends the run, as without this assist
    assert not resp.success and "2 consecutive times" in str(resp.error)
    assert (ws / "text.py").read_text() == SOURCE


def test_code_that_parses_is_not_asked_for_again(ws: Path) -> None:
    resp, transport = run(ws, [change(MEANT), turn(answer="indent adds it now.")])
    assert resp.success, resp.error
    assert rewrite_requests(transport) == []
    assert len(transport.requests) == 2


def test_a_plain_reply_for_another_function_is_not_taken(ws: Path) -> None:
    other = "def dedent(text):\n    return text\n"
    resp, _ = run(ws, [change(SENT), block(other), change(MEANT), turn(answer="done")])
    assert resp.success, resp.error
    made = [e for e in resp.events if e.name == "replace_function"]
    assert [e.status for e in made] == ["failed", "done"]
    assert "def dedent" not in (ws / "text.py").read_text()
