"""The code-block protocol (``protocol="blocks"``, :mod:`rune.runtime.blocks`): a change is a
fenced block under a file's path, written into the file by ``replace_function`` with no name
(every definition in the block replaces its namesake, new imports go to the top)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.openai_server import FakeOpenAIServer, text_reply

from rune.errors import SandboxDenied, ToolError
from rune.local_tool_runtime import LocalToolRuntime
from rune.runtime.blocks import BlockCall, parse_blocks, reply
from rune.tool_executor import SandboxPolicy, ToolExecutor
from rune.tools.python_code import write_definitions
from rune.transport.openai_compat import OpenAICompatTransport

BROKEN = '''"""Arithmetic."""
import math


def add(a, b):
    return a - b


def area(r):
    return math.pi * r


class Calc:
    def double(self, x):
        return x + 1
'''
TASK = [{"role": "user", "content": "Fix add() in calc.py."}]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(BROKEN)
    return tmp_path


def executor(project: Path) -> ToolExecutor:
    """Commands contained (run_python, the check tool, is offered only then)."""
    return ToolExecutor(SandboxPolicy.default(home=project.parent), project)


def specs(project: Path) -> Any:
    return executor(project).specs()


# --- reading a reply --------------------------------------------------------------------------


FIX = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize(
    "content",
    [
        f"add() subtracts.\n\ncalc.py\n```python\n{FIX}```",
        f"**`calc.py`**:\n```python\n{FIX}```",
        f"File: calc.py\n```python\n{FIX}```",
        f"```python calc.py\n{FIX}```",
        f"```python\n# calc.py\n{FIX}```",
        f"The bug is in `calc.py`, here is the fix:\n```python\n{FIX}```",
        f"calc.py\n```python\n{FIX}",  # the model forgot the closing fence: not cut off
    ],
)
def test_a_block_under_a_python_path_writes_its_definitions(project: Path, content: str) -> None:
    turn = parse_blocks(content, specs(project))
    if content.endswith("```"):
        assert turn.calls == [
            BlockCall("replace_function", {"path": "calc.py", "name": "", "code": FIX})
        ]
    else:
        assert turn.error is not None and "not closed" in turn.error


def test_a_check_block_runs_the_check_tool_with_its_name_above_or_inside(project: Path) -> None:
    check = "from calc import add\nassert add(2, 3) == 5\n"
    above = parse_blocks(f"run_python\n```python\n{check}```", specs(project))
    inside = parse_blocks(f"Let me check:\n```python\nrun_python\n{check}```", specs(project))
    empty = parse_blocks("To check:\n```python\nrun_python\n```", specs(project))
    assert above.calls == inside.calls == [BlockCall("run_python", {"code": check})]
    assert empty.error is not None and "write the code for run_python" in empty.error


def test_other_tools_are_called_as_in_the_text_protocol_after_the_blocks(project: Path) -> None:
    content = (
        f'calc.py\n```python\n{FIX}```\n<tool_call>{{"name": "read_file", "arguments": '
        '{"path": "calc.py"}}</tool_call>'
    )
    turn = parse_blocks(content, specs(project))
    assert [c.name for c in turn.calls] == ["replace_function", "read_file"]
    fenced = parse_blocks(f"Reading it:\n```\n{content.split(chr(10))[-1]}\n```", specs(project))
    assert fenced.calls == [BlockCall("read_file", {"path": "calc.py"})]


def test_plain_text_is_the_answer_and_shown_blocks_are_not_calls(project: Path) -> None:
    shown = "Done. Run the tests with:\n```bash\npython -m pytest\n```"
    assert parse_blocks("add() now adds.", specs(project)).answer == "add() now adds."
    assert parse_blocks(shown, specs(project)).calls == []
    assert parse_blocks(shown, specs(project)).answer is not None


@pytest.mark.parametrize(
    "content",
    [
        f"Here is the fix:\n```python\n{FIX}```",  # no path anywhere
        f"In a.py or b.py:\n```python\n{FIX}```",  # two candidates: not guessed
        f"../calc.py\n```python\n{FIX}```",  # a path with .. is not a header
    ],
)
def test_a_block_with_no_clear_path_is_sent_back(project: Path, content: str) -> None:
    turn = parse_blocks(content, specs(project))
    assert turn.calls == [] and turn.error is not None and "no file path" in turn.error


def test_a_replayed_call_reads_back_as_the_same_call(project: Path) -> None:
    for call in [
        BlockCall("replace_function", {"path": "calc.py", "name": "", "code": FIX}),
        BlockCall("run_python", {"code": "print('```')\n"}),
        BlockCall("write_file", {"path": "notes.md", "content": "# Notes\n"}),
        BlockCall("read_file", {"path": "calc.py"}),
    ]:
        assert parse_blocks(reply(call), specs(project)).calls == [call]


# --- writing the definitions ------------------------------------------------------------------


def test_each_definition_replaces_its_namesake_and_new_imports_go_to_the_top() -> None:
    code = (
        "import functools\nimport math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\n"
        "def double(self, x):\n    return x * 2\n\n\ndef new():\n    return 1\n"
    )
    after = write_definitions(Path("calc.py"), BROKEN, code)
    assert after.startswith('"""Arithmetic."""\nimport math\nimport functools\n')
    assert "return math.pi * r * r" in after and "return x * 2" in after
    assert "    def double(self, x):\n        return x * 2" in after  # the method, indented
    assert after.rstrip().endswith("def new():\n    return 1")
    assert "return a - b" in after  # add() was not sent: untouched


def test_the_complete_file_is_taken_whole_but_a_partial_one_with_statements_is_refused() -> None:
    whole = BROKEN.replace("a - b", "a + b").replace('"""Arithmetic."""', "LIMIT = 3")
    assert write_definitions(Path("calc.py"), BROKEN, whole) == whole
    with pytest.raises(ToolError, match=r"leaves out some of calc\.py"):
        write_definitions(Path("calc.py"), BROKEN, f"LIMIT = 3\n\n\n{FIX}")


def test_a_bodiless_or_broken_block_is_refused() -> None:
    with pytest.raises(ToolError, match="no body"):
        write_definitions(Path("calc.py"), BROKEN, 'def add(a, b):\n    """Add."""\n')
    with pytest.raises(ToolError, match="not valid Python"):
        write_definitions(Path("calc.py"), BROKEN, "def add(a, b):\nreturn a + b\n")


# --- the loop, over HTTP ----------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def runtime(server: FakeOpenAIServer, project: Path) -> LocalToolRuntime:
    transport = OpenAICompatTransport(server.base_url, read_timeout=5)
    return LocalToolRuntime(transport, executor(project), model="m", protocol="blocks")


def test_a_block_pauses_for_approval_and_an_early_answer_is_sent_back_for_a_check(
    server: FakeOpenAIServer, project: Path
) -> None:
    check = "from calc import add\nassert add(2, 3) == 5\n"
    server.script(
        text_reply(f"add() subtracts.\n\ncalc.py\n```python\n{FIX}```"),
        text_reply("add() now adds."),  # too early: no check ran
        text_reply(f"run_python\n```python\n{check}```"),
        text_reply("add() now adds; the check passed."),
    )
    rt = runtime(server, project)
    paused = rt.run(TASK)
    assert paused.pending is not None and paused.pending.name == "replace_function"
    assert "+    return a + b" in paused.pending.preview
    done = rt.approve(paused.pending_state)
    assert done.success and done.text == "add() now adds; the check passed."
    assert [(e.name, e.status, e.source) for e in done.events] == [
        ("replace_function", "done", "blocks"),
        ("run_python", "done", "blocks"),
    ]
    assert (project / "calc.py").read_text() == BROKEN.replace("a - b", "a + b")
    bodies = server.chat_bodies
    assert "tools" not in bodies[0] and "response_format" not in bodies[0]
    assert bodies[0]["messages"][0]["content"].startswith("How to reply:")
    sent_back = bodies[2]["messages"][-1]
    assert sent_back == {
        "role": "user",
        "content": "Before you answer, run run_python to check the code as it is now.",
    }


# --- hostile replies ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line", ["a." * 50_000 + "!", "a-" * 50_000 + ".py!", "." * 100_000, "# " + "a." * 50_000]
)
def test_a_long_line_above_or_in_a_block_is_read_in_linear_time(project: Path, line: str) -> None:
    """Path-like lines of 100 KB: the header, prose and first-line patterns backtracked
    quadratically (27 s for 40 KB) before each was bounded to a path's length."""
    started = time.monotonic()
    above = parse_blocks(f"{line}\n```python\n{FIX}```", specs(project))
    inside = parse_blocks(f"calc.py\n```python\n{line}\n{FIX}```", specs(project))
    assert time.monotonic() - started < 5
    assert above.error is not None and "no file path" in above.error
    assert inside.calls and inside.calls[0].arguments["path"] == "calc.py"


def test_a_long_fence_line_is_read_in_linear_time(project: Path) -> None:
    """The fence pattern's spaces before the info string overlapped the info string's own:
    8 s for 30 KB of spaces and a stray backtick."""
    started = time.monotonic()
    turn = parse_blocks("```" + " \t" * 50_000 + "`\nadd() adds now.", specs(project))
    assert time.monotonic() - started < 5
    assert turn.answer is not None and turn.calls == []


def test_a_class_sent_with_only_the_method_that_changed_keeps_its_other_methods() -> None:
    source = (
        "class Calc:\n    def double(self, x):\n        return x + 1\n\n"
        "    def half(self, x):\n        return x / 2\n"
    )
    block = "class Calc:\n    def double(self, x):\n        return x * 2\n"
    after = write_definitions(Path("calc.py"), source, block)
    assert "return x * 2" in after and "def half(self, x):\n        return x / 2" in after
    whole = block + "\n    def half(self, x):\n        return x // 2\n"
    assert write_definitions(Path("calc.py"), source, whole) == whole  # every method: the class


@pytest.mark.parametrize("path", ["sitecustomize.py", ".git/hooks/check.py", "/etc/rune_evil.py"])
def test_a_block_is_refused_where_write_file_is(project: Path, path: str) -> None:
    """A block may create a file (an empty name writes every definition): it goes through the
    same sandbox as write_file, so code-running and outside paths stay refused."""
    ex = executor(project)
    code = "def f():\n    return 1\n"
    with pytest.raises(SandboxDenied):
        ex.prepare("write_file", {"path": path, "content": code})
    with pytest.raises(SandboxDenied):
        ex.prepare("replace_function", {"path": path, "name": "", "code": code})
