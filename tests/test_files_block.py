"""The files context block: a small workspace goes into the context whole, a bigger one only
with the files the request names; always as read_file would read them (same policy)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rune.operator import RuneOperator
from rune.operator.blocks import FILES_BUCKET, SMALL_WORKSPACE_FILES, files_block
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.scripted import ScriptedTransport

CALC = "def add(a, b):\n    return a - b\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "calc.py").write_text(CALC)
    (project / "README.md").write_text("Calculator.\n")
    return project


def policy(ws: Path) -> SandboxPolicy:
    return SandboxPolicy.workspace_only(ws)


def test_a_small_workspace_goes_in_whole_but_not_binaries_or_hidden_dirs(ws: Path) -> None:
    (ws / "logo.png").write_bytes(b"\x89PNG\0\0\0")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "pkg").mkdir()
    (ws / "pkg" / "util.py").write_text("X = 1\n")
    block = files_block(ws, policy(ws), "fix it")
    assert block is not None
    assert (block.name, block.bucket, block.evictable) == ("files", FILES_BUCKET, True)
    assert f"calc.py\n```python\n{CALC.rstrip()}\n```" in block.text
    assert "pkg/util.py\n```python\nX = 1\n```" in block.text
    assert "README.md\n```\nCalculator.\n```" in block.text
    assert "PNG" not in block.text and "[core]" not in block.text


def test_a_bigger_workspace_gives_only_the_files_the_request_names(ws: Path) -> None:
    for n in range(SMALL_WORKSPACE_FILES + 1):
        (ws / f"mod{n}.py").write_text(f"N = {n}\n")
    assert files_block(ws, policy(ws), "what does this project do?") is None
    block = files_block(ws, policy(ws), "Fix add() in calc.py, see ./mod3.py and nothing.py")
    assert block is not None
    assert "calc.py\n```python" in block.text and "mod3.py\n```python\nN = 3" in block.text
    assert "mod4.py" not in block.text and "nothing.py" not in block.text


def test_a_big_test_file_named_by_a_test_id_stays_out_small_ones_come_in(ws: Path) -> None:
    """The test run's digest shows the named test; its whole file would cost minutes."""
    for n in range(SMALL_WORKSPACE_FILES + 1):
        (ws / f"mod{n}.py").write_text(f"N = {n}\n")
    (ws / "tests").mkdir()
    (ws / "tests" / "test_big.py").write_text("def test_x():\n    assert True\n" * 200)
    (ws / "tests" / "test_small.py").write_text("def test_y():\n    assert True\n")
    request = (
        "The test tests/test_big.py::test_x fails, and so does tests/test_small.py::test_y; "
        "see tests/test_big.py"
    )
    block = files_block(ws, policy(ws), request)
    assert block is not None
    assert "tests/test_small.py\n```python" in block.text
    assert "tests/test_big.py" not in block.text
    # named without an id, the same file is read as any file the request names
    plain = files_block(ws, policy(ws), "see tests/test_big.py")
    assert plain is not None and "tests/test_big.py\n```python" in plain.text


def test_files_outside_the_workspace_or_behind_links_never_come_in(
    ws: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2\n")
    os.symlink(secret, ws / "link.txt")
    for n in range(SMALL_WORKSPACE_FILES + 1):
        (ws / f"mod{n}.py").write_text("")
    request = f"read ../secret.txt, {secret}, link.txt and /etc/passwd"
    assert files_block(ws, policy(ws), request) is None
    assert files_block(ws, SandboxPolicy.default(), request) is None


def test_the_operator_puts_the_block_in_the_system_message_of_the_turn(ws: Path) -> None:
    transport = ScriptedTransport([{"content": "It subtracts."}])
    executor = ToolExecutor(policy(ws), ws, contain_commands=False)
    operator = RuneOperator(transport, executor, model="m")
    response = operator.send("Why is add() in calc.py wrong?")
    assert response.success
    system = transport.requests[0].messages[0]
    assert system["role"] == "system"
    assert "Files in the workspace, as they are now" in system["content"]
    assert "    return a - b" in system["content"]
