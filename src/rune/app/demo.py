"""The README's first command: a disposable project with a broken ``add()``, a script that
fixes it for ``--backend scripted`` (tests, CI, a machine without any model), and the check
that tries the result.

The check imports ``calc.py``, which the model wrote. Where checks run contained it runs the
way ``run_python`` runs one, with nothing writable and no network, so it needs no approval (Rune
ran the demo's tests the same way). Elsewhere it is a command like any other: shown, asked for
(or approved by ``--yes --yes``), and run the way ``run_command`` runs one.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rune.errors import ConfigError
from rune.messages import PendingApproval
from rune.tools.base import ToolContext
from rune.tools.checks import can_run_contained, run_read_only
from rune.tools.commands import prepare_command, run_approved
from rune.tools.sandbox import SandboxPolicy
from rune.tools.spec import PreparedChange
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
#: unittest-style, so the project's interpreter runs it with no pytest installed (pytest runs
#: it too): Rune's own test run works in the throw-away project, with nothing to install
TEST_CALC = """import unittest

from calc import add, mul


class TestCalc(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)


if __name__ == "__main__":
    unittest.main()
"""


def demo_directory() -> Path:
    """Where ``rune demo`` keeps its sample project: one directory in Rune's cache (not in its
    data directory, which the sandbox keeps the model out of), made afresh by every demo."""
    from platformdirs import user_cache_path  # only when asked: keeps `import rune` light

    return user_cache_path("rune") / "demo"


def create_demo_project(directory: Path | None = None) -> Path:
    """Make the sample project, calc.py and test_calc.py, in ``directory`` (default
    :func:`demo_directory`), replacing what an earlier demo left there: demos do not pile up."""
    project = directory if directory is not None else demo_directory()
    if project.is_symlink():
        raise ConfigError(
            f"{project} is a symlink; Rune makes its demo project only in a real directory"
        )
    if project.exists():
        shutil.rmtree(project)  # Rune's own: the last demo's project, whatever the model left
    project.mkdir(parents=True)
    (project / "calc.py").write_text(BROKEN_CALC, encoding="utf-8")
    (project / "test_calc.py").write_text(TEST_CALC, encoding="utf-8")
    return project


CHECK_SOURCE = "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"
CHECK_TIMEOUT = 30
#: a JSON file of assistant turns that ``--backend scripted`` replays instead of the demo's
SCRIPT_ENV = "RUNE_SCRIPT"


@dataclass(frozen=True)
class DemoCheck:
    """The command that tries ``add(2, 3)`` in the sample project, prepared for approval."""

    context: ToolContext
    change: PreparedChange

    @property
    def pending(self) -> PendingApproval:
        change = self.change
        return PendingApproval(
            change.tool, change.arguments, change.summary, change.preview, change.contained
        )

    def run(self) -> bool:
        """Run the approved check; True when ``add(2, 3) == 5``. Raises ToolError."""
        outcome, _ = run_approved(self.context, self.change)
        return outcome.exit_code == 0


def demo_check(project: Path) -> DemoCheck:
    """The check for ``project``: contained to it, exactly like an approved run_command."""
    workspace = Path(os.path.realpath(project))
    context = ToolContext(SandboxPolicy.workspace_only(workspace), workspace)
    command = (
        f"PYTHONDONTWRITEBYTECODE=1 {shlex.quote(sys.executable)} -c {shlex.quote(CHECK_SOURCE)}"
    )
    change = prepare_command(context, {"command": command, "timeout": CHECK_TIMEOUT})
    return DemoCheck(context, change)


def try_contained(project: Path, policy: SandboxPolicy) -> bool | None:
    """Try ``add(2, 3)`` read-only and contained under ``policy`` (the run's own), as a
    ``run_python`` check runs: True when it is 5; None where checks cannot run contained here
    (then :func:`demo_check` asks). Raises ToolError."""
    workspace = Path(os.path.realpath(project))
    context = ToolContext(policy, workspace)
    if not can_run_contained(context):
        return None
    return run_read_only(context, ["-c", CHECK_SOURCE], timeout=CHECK_TIMEOUT).exit_code == 0


def _call(name: str, **arguments: object) -> dict[str, object]:
    return {"function": {"name": name, "arguments": arguments}}


def _script_from(path: str) -> list[dict[str, object]]:
    try:
        turns = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"{SCRIPT_ENV}={path}: cannot read a script of turns: {err}") from None
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise ConfigError(f"{SCRIPT_ENV}={path}: a script is a JSON list of assistant turns")
    return turns


def scripted_demo_transport(*, skip: int = 0) -> ScriptedTransport:
    """A model that reads calc.py, rewrites it with the fix, and says what it did; or, when
    ``RUNE_SCRIPT`` names a JSON list of assistant turns (Ollama's shape), those turns.

    ``skip`` drops the turns a resumed session has already had.
    """
    script = os.environ.get(SCRIPT_ENV)
    if script:
        return ScriptedTransport(_script_from(script)[skip:], thinking=True)
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
