"""Keep what passes (rune.assists.keep): where Rune runs the tests, a change that makes more of
them fail than fail now is not made, and the model hears the counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.fakes.cli import call, final, rune
from tests.test_test_driven import (
    FIXED,
    approve_all,
    calc_project,
    change,
    needs_bwrap,
    runtime,
)

from rune.assists.keep import worse_message
from rune.cli import EXIT_OK
from rune.transport.scripted import ScriptedTransport

#: the whole test file: test_add fails on BROKEN (add(2, 3) is -1), test_zero passes
TASK = "The tests in tests/test_calc.py fail. Fix the bug in calc/ops.py (the tests are right)."
#: fails both tests: add(2, 3) is 6, add(0, 0) is 1
WORSE = "def add(a, b):\n    return a + b + 1\n"
#: fails test_add as BROKEN does (another value), test_zero still passes
OTHER = "def add(a, b):\n    return a * b\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return calc_project(tmp_path / "ws")


@needs_bwrap
def test_a_change_that_breaks_a_passing_test_is_not_made(ws: Path) -> None:
    transport = ScriptedTransport([change(WORSE), change(FIXED)], tools=True)
    loop = runtime(ws, transport)
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.success and (ws / "calc" / "ops.py").read_text() == FIXED
    refused = [e for e in resp.events if e.status == "failed" and e.name == "replace_function"]
    assert len(refused) == 1 and refused[0].arguments["code"] == WORSE
    assert refused[0].error == worse_message(2, 2, 1)
    # the model heard it, and no sampled repair was spent on a change that cannot be made
    assert "with this change 2 of the 2 tests fail; 1 fail now" in str(
        transport.requests[1].messages[-1]["content"]
    )
    assert len(transport.requests) == 2


@needs_bwrap
def test_a_change_that_breaks_nothing_more_is_made(ws: Path) -> None:
    # as many failing as now: not worse, so it is not refused; it goes on to the sampled
    # repair like any change the tests fail (the script's next reply is the sample)
    transport = ScriptedTransport([change(OTHER), change(FIXED)], tools=True)
    loop = runtime(ws, transport)
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.success and (ws / "calc" / "ops.py").read_text() == FIXED
    assert not any("Not applied" in (e.error or "") for e in resp.events)
    assert any("failed the project's tests; of 1 other" in w for w in resp.warnings)


@needs_bwrap
def test_the_rune_command_keeps_what_passes(ws: Path, home: Path) -> None:
    worse = call("edit_file", path="calc/ops.py", old_text="a - b", new_text="a + b + 1")
    fixed = call("edit_file", path="calc/ops.py", old_text="a - b", new_text="a + b")
    args = ("run", "--backend", "scripted", "--workspace", str(ws), "-yy", TASK)
    done = rune(home, *args, script=[worse, fixed, final("Fixed.")])
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert "2 of the 2 tests fail; 1 fail now" in done.stdout
    assert (ws / "calc" / "ops.py").read_text() == FIXED
