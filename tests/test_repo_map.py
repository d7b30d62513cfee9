"""The repository map (rune.operator.repo_map): where things are in a workspace too big to show."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rune.operator import RuneOperator
from rune.operator.repo_map import MAP_CHARS, map_block
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.scripted import ScriptedTransport

TEST_ID = "pkg/tests/test_shapes.py::test_area"
REQUEST = f"The test {TEST_ID} fails with: assert 6 == 5. Fix the library code."


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg" / "tests").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "shapes.py").write_text(
        "import math\n\n\ndef area(w, h):\n    return w * h + 1\n\n\n"
        "class Circle:\n    def __init__(self, r):\n        self.r = r\n\n"
        "    def area(self):\n        return math.pi * self.r ** 2\n"
    )
    (root / "pkg" / "colors.py").write_text("def mix(a, b):\n    return a\n")
    (root / "pkg" / "tests" / "test_shapes.py").write_text(
        "from pkg.shapes import area\n\n\ndef test_area():\n    assert area(2, 3) == 6\n"
    )
    for n in range(12):
        (root / "pkg" / f"extra{n}.py").write_text(f"def helper{n}():\n    return {n}\n" * 40)
    (root / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    return root


def test_the_map_details_the_code_the_named_test_imports(repo: Path) -> None:
    block = map_block(repo, SandboxPolicy.workspace_only(repo), REQUEST)
    assert block is not None and block.evictable
    lines = block.text.splitlines()
    assert lines[1] == "pkg/shapes.py: area 4, class Circle 8, Circle.__init__ 9, Circle.area 12"
    # the test file is not detailed (the test run shows the test), but listed
    assert not any(line.startswith("pkg/tests/test_shapes.py:") for line in lines)
    assert "pkg/tests/ test_shapes.py" in lines
    assert "(top) setup.py" in lines
    assert any(line.startswith("pkg/ ") and "colors.py" in line for line in lines)


def test_names_in_the_task_rank_the_files_that_define_them(repo: Path) -> None:
    block = map_block(repo, SandboxPolicy.workspace_only(repo), "mix() in the colors returns a")
    assert block is not None
    assert block.text.splitlines()[1] == "pkg/colors.py: mix 1"


def test_a_small_workspace_has_no_map(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    assert map_block(tmp_path, SandboxPolicy.workspace_only(tmp_path), "fix add") is None


def test_the_map_stays_within_its_size(repo: Path) -> None:
    for n in range(300):
        (repo / "pkg" / f"module_with_a_long_name_{n}.py").write_text(
            "".join(f"def function_{k}():\n    pass\n" for k in range(30))
        )
    block = map_block(repo, SandboxPolicy.workspace_only(repo), REQUEST + " function_3")
    assert block is not None and len(block.text) <= MAP_CHARS
    assert block.text.splitlines()[1].startswith("pkg/shapes.py: area 4")


def test_hostile_files_do_not_leak_or_break_the_map(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.py"
    secret.write_text("def stolen_secret():\n    pass\n")
    os.symlink(secret, repo / "pkg" / "linked.py")
    (repo / "pkg" / "broken.py").write_text("def (:\n")
    (repo / "pkg" / "deep.py").write_text("x = " + "(" * 5000 + ")" * 5000 + "\n")
    (repo / "pkg" / "evil\x1b[31m.py").write_text("def evil():\n    pass\n")
    request = REQUEST + " stolen_secret broken deep evil"
    block = map_block(repo, SandboxPolicy.workspace_only(repo), request)
    assert block is not None
    assert "stolen_secret" not in block.text
    assert "\x1b" not in block.text


def test_the_operator_sends_the_map_in_the_system_message(repo: Path) -> None:
    transport = ScriptedTransport([{"content": json.dumps({"answer": "ok"})}], tools=False)
    executor = ToolExecutor(SandboxPolicy.workspace_only(repo), repo)
    operator = RuneOperator(transport, executor, model="m", protocol="constrained")
    operator.send(REQUEST)
    system = str(transport.requests[0].messages[0]["content"])
    assert "Repository map" in system and "pkg/shapes.py: area 4" in system
