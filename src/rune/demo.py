"""The README's first command: a disposable project with a broken ``add()``, and a script that
fixes it for ``--backend scripted`` (tests, CI, a machine without any model)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rune.transport.scripted import ScriptedTransport

DEMO_TASK = "Fix the bug in calc.py so that add(2, 3) == 5. test_calc.py shows what is expected."
SCRIPTED_MODEL = "scripted-demo"

BROKEN_CALC = '''"""A tiny calculator with a bug in it."""


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
'''
FIXED_CALC = BROKEN_CALC.replace("return a - b", "return a + b")
TEST_CALC = """from calc import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6
"""


def create_demo_project(home: Path | None = None) -> Path:
    """Make ``~/.rune-e2e-probe/demo-<timestamp>/`` with calc.py and test_calc.py."""
    base = (home if home is not None else Path.home()) / ".rune-e2e-probe"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    project = base / f"demo-{stamp}"
    suffix = 1
    while project.exists():
        suffix += 1
        project = base / f"demo-{stamp}-{suffix}"
    project.mkdir(parents=True)
    (project / "calc.py").write_text(BROKEN_CALC, encoding="utf-8")
    (project / "test_calc.py").write_text(TEST_CALC, encoding="utf-8")
    return project


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


def scripted_demo_transport(*, skip: int = 0) -> ScriptedTransport:
    """A model that reads calc.py, rewrites it with the fix, and says what it did.

    ``skip`` drops the turns a resumed session has already had.
    """
    turns: list[dict[str, Any]] = [
        {
            "thinking": "The task names calc.py; I should read it before changing it.",
            "content": "Let me look at calc.py first.",
            "tool_calls": [_call("read_file", path="calc.py")],
        },
        {
            "thinking": "add() subtracts. It must return a + b.",
            "content": "add() returns a - b; it should return a + b. Fixing it.",
            "tool_calls": [_call("write_file", path="calc.py", content=FIXED_CALC)],
        },
        {"content": "Fixed: add() in calc.py now returns a + b, so add(2, 3) == 5."},
    ]
    return ScriptedTransport(turns[skip:], thinking=True)
