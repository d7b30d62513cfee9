"""A check proves a change only when it fails on the code as it was (rune.assists.check): a run
whose model's checks all pass on the unchanged code too does not end done."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import call, final, rune

from rune.assists.check import MAX_TRIED_CHECKS, SHOWS_NOTHING
from rune.cli import EXIT_INCOMPLETE, EXIT_OK
from rune.messages import OperatorResponse
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.scripted import ScriptedTransport

pytestmark = pytest.mark.bwrap
SOURCE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a + b + 1\n"
TASK = [{"role": "user", "content": "add(2, 3) in calc.py should be 5. Fix it."}]
#: fails on the code as it was (add(2, 3) was -1): it shows the fix
SHOWS = "from calc import add\nassert add(2, 3) == 5, add(2, 3)"
#: passes on the code as it was: it shows nothing about add()
VACUOUS = "from calc import mul\nassert mul(2, 3) == 6"
#: passes on the old code and on a wrong fix alike
WEAK = "from calc import add\nassert add(0, 0) != 7"


def turn(**fields: Any) -> dict[str, Any]:
    return {"content": json.dumps(fields)}


def change(code: str) -> dict[str, Any]:
    return turn(tool="replace_function", arguments={"path": "calc.py", "name": "add", "code": code})


def check(code: str) -> dict[str, Any]:
    return turn(tool="run_python", arguments={"code": code})


def finish(ws: Path, script: list[dict[str, Any]]) -> OperatorResponse:
    (ws / "calc.py").write_text(SOURCE)
    executor = ToolExecutor(SandboxPolicy.default(home=ws.parent), ws)
    runtime = LocalToolRuntime(
        ScriptedTransport(script), executor, model="m", protocol="constrained"
    )
    response = runtime.run(list(TASK))
    while response.pending is not None:
        response = runtime.approve(response.pending_state)
    return response


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def test_a_check_that_passes_on_the_old_code_too_leaves_the_task_unfinished(ws: Path) -> None:
    response = finish(ws, [change(WRONG), check(WEAK), turn(answer="Fixed add().")])
    assert response.success and response.changed
    assert response.outcome == "incomplete" and response.incomplete == SHOWS_NOTHING
    assert "a + b + 1" in (ws / "calc.py").read_text()  # the change stays made
    # the model was not told: its answer was taken as it came
    assert response.text == "Fixed add()."


def test_a_check_that_fails_on_the_old_code_shows_the_change(ws: Path) -> None:
    response = finish(ws, [change(FIXED), check(SHOWS), turn(answer="Fixed add().")])
    assert response.outcome == "done" and response.incomplete is None


def test_one_check_that_shows_the_change_is_enough(ws: Path) -> None:
    script = [change(FIXED), check(VACUOUS), check(SHOWS), turn(answer="Fixed.")]
    assert finish(ws, script).outcome == "done"


def test_the_same_check_is_run_again_once_and_many_give_no_verdict(ws: Path) -> None:
    script = [change(WRONG), check(WEAK), check(WEAK), turn(answer="Fixed.")]
    assert finish(ws, script).incomplete == SHOWS_NOTHING
    many = [check(f"from calc import mul\nassert mul({n}, 1) == {n}") for n in range(4)]
    response = finish(ws, [change(WRONG), *many, turn(answer="Fixed.")])
    assert len(many) > MAX_TRIED_CHECKS and response.outcome == "done"


def test_only_the_checks_since_the_last_change_count(ws: Path) -> None:
    # the first fix was shown to work, then the model changed add() again and checked
    # something unrelated: nothing shows the code as it is now works
    script = [change(FIXED), check(SHOWS), change(WRONG), check(VACUOUS), turn(answer="Done.")]
    response = finish(ws, script)
    assert response.outcome == "incomplete" and response.incomplete == SHOWS_NOTHING


def test_the_rune_command_does_not_call_it_done(home: Path) -> None:
    ws = home / "work"
    ws.mkdir()
    (ws / "calc.py").write_text(SOURCE)
    fix = call("edit_file", path="calc.py", old_text="a - b", new_text="a + b + 1")
    weak = call("run_python", code=WEAK)
    script = [fix, weak, final("Fixed add().")]
    args = ("run", "--backend", "scripted", "--workspace", str(ws), "-yy", "fix add()")
    done = rune(home, *args, script=script)
    assert done.returncode == EXIT_INCOMPLETE, done.stdout + done.stderr
    assert "✓ done" not in done.stdout
    assert "passes on the code as it was before the change, too" in done.stdout

    (ws / "calc.py").write_text(SOURCE)
    shown = [call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")]
    shown += [call("run_python", code=SHOWS), final("Fixed add().")]
    done = rune(home, *args, script=shown)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr


# --- a check changed to fit the code --------------------------------------------------------


def test_a_check_changed_to_expect_what_the_code_does_leaves_the_task_unfinished(
    ws: Path,
) -> None:
    # The 1.5B on 15_two_files (no reading tools): circle_area(3) == 28.274 failed, so it
    # changed the code and the check to circle_area(3) == 6, which passed, and answered.
    script = [
        change(WRONG),
        check("from calc import add\nassert add(2, 3) == 5, add(2, 3)"),
        check("from calc import add\nassert add(2,3) == 6"),  # add(2, 3) was -1: it "shows"
        turn(answer="Fixed add()."),
    ]
    response = finish(ws, script)
    assert response.outcome == "incomplete", response.incomplete
    assert response.incomplete is not None
    assert "expects of add(2, 3) (5 before it failed, 6 now)" in response.incomplete


def test_the_same_expectation_passing_after_a_new_change_shows_the_fix(ws: Path) -> None:
    script = [
        change(WRONG),
        check(SHOWS),
        change(FIXED),
        check(SHOWS + "\nassert add(1, 1) == 2"),
        turn(answer="Fixed add()."),
    ]
    response = finish(ws, script)
    assert response.outcome == "done", response.incomplete


def test_a_check_that_failed_in_its_own_code_moves_no_expectation(ws: Path) -> None:
    # only an assertion that failed says what the model expected and did not get
    script = [
        change(FIXED),
        check("from calc import ad\nassert add(2, 3) == 4"),  # ImportError
        check(SHOWS),
        turn(answer="Fixed add()."),
    ]
    assert finish(ws, script).outcome == "done"


def test_the_expression_named_is_one_short_line_a_terminal_shows_as_it_is(ws: Path) -> None:
    hostile = "add(2, 3) + len('\x1b[2J" + "x" * 200 + "')"
    script = [
        change(WRONG),
        check(f"from calc import add\nassert {hostile} == 5"),
        check(f"from calc import add\nassert {hostile} == 210"),  # what it is now
        turn(answer="Fixed add()."),
    ]
    response = finish(ws, script)
    assert response.incomplete is not None
    assert "changed what its check expects" in response.incomplete
    assert "\x1b" not in response.incomplete and "…" in response.incomplete
    assert len(response.incomplete) < 300
