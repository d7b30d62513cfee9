"""Ask again when a change changes nothing (rune.assists.again): where Rune runs the project's
tests, a reply that re-sends what the file holds is not run; a sampled reply from the same
conversation takes its place, the one the tests pick."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.test_test_driven import BROKEN as CALC_BROKEN
from tests.test_test_driven import FIXED as CALC_FIXED
from tests.test_test_driven import TASK as CALC_TASK
from tests.test_test_driven import WRONG as CALC_WRONG
from tests.test_test_driven import approve_all, calc_project, change, executor, needs_bwrap, turn

from rune.assists import standard_assists
from rune.assists.again import MAX_AGAIN, SAMPLES, SET_ON_IT, changes_nothing, judged_change
from rune.assists.repair import TEMPERATURE
from rune.calls import tool_request
from rune.errors import NothingToChange
from rune.messages import ToolEvent
from rune.pause.state import LoopState
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.testing import auto_check
from rune.transport.scripted import ScriptedTransport

SOURCE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
AS_IT_IS = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TASK = [{"role": "user", "content": "add(2, 3) in calc.py should be 5. Fix it."}]
#: calc/ops.py as calc_project writes it, but for a blank line the file does not keep
SPACED = CALC_BROKEN + "\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "calc.py").write_text(SOURCE)
    return path


def sampled(transport: ScriptedTransport) -> list[int]:
    return [
        i
        for i, r in enumerate(transport.requests)
        if r.options is not None and r.options.get("temperature") == TEMPERATURE
    ]


def run_on_calc(
    tmp_path: Path,
    script: list[dict[str, Any]],
    *,
    without: frozenset[str] = frozenset({"revise"}),
) -> tuple[Any, Path, ScriptedTransport]:
    """A run on calc_project's failing test, with every assist but the sampled repair (which
    would meet the reply first and draw from a fresh start) and those ``without`` names: by
    default the fix asked for first (rune.assists.revise, tests/test_revise.py)."""
    ws = calc_project(tmp_path / "ws")
    tools = executor(ws)
    assists = standard_assists(
        auto_checks=lambda request: auto_check(request, tools.workspace, tools.policy),
        without=frozenset({"repair", *without}),
    )
    transport = ScriptedTransport(script, tools=True)
    loop = LocalToolRuntime(transport, tools, model="m", protocol="constrained", assists=assists)
    resp = approve_all(loop, loop.run([{"role": "user", "content": CALC_TASK}]))
    return resp, ws / "calc" / "ops.py", transport


def test_a_change_that_leaves_the_file_as_it_is_is_told_by_its_type(ws: Path) -> None:
    ex = executor(ws)
    same = tool_request("replace_function", {"path": "calc.py", "name": "add", "code": AS_IT_IS})
    other = tool_request("replace_function", {"path": "calc.py", "name": "add", "code": FIXED})
    missing = tool_request("replace_function", {"path": "nope.py", "name": "add", "code": FIXED})
    assert isinstance(changes_nothing(ex, same), NothingToChange)
    assert "nothing to change" in str(changes_nothing(ex, same))
    assert changes_nothing(ex, other) is None
    assert changes_nothing(ex, missing) is None  # its own error: the model reads it when it runs
    with pytest.raises(NothingToChange):
        ex.prepare(same.name, same.arguments)
    assert (ws / "calc.py").read_text() == SOURCE


def test_without_tests_rune_runs_the_reply_is_run_as_it_is(ws: Path) -> None:
    # the model's own check is no judge of samples (on the algorithm suite it was wrong)
    script = [change(AS_IT_IS, "calc.py"), turn(answer="add is fine as it is.")]
    transport = ScriptedTransport(script, tools=True)
    loop = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(loop, loop.run(list(TASK)))
    assert sampled(transport) == []
    failed = [e for e in resp.events if e.name == "replace_function"]
    assert len(failed) == 1 and "nothing to change" in (failed[0].error or "")


@needs_bwrap
def test_the_tests_pick_the_sample_that_passes_them(tmp_path: Path) -> None:
    resp, ops, transport = run_on_calc(
        tmp_path,
        [
            change(CALC_BROKEN),  # the model's reply: the function as the file has it
            turn(tool="run_command", arguments={"command": "rm calc/ops.py"}),  # not an edit
            change(CALC_WRONG),  # changes something, fails the same test
            change(CALC_FIXED),  # passes
        ],
    )
    assert resp.success, resp.error
    assert ops.read_text() == CALC_FIXED
    assert sampled(transport) == [1, 2, 3]
    assert any(
        "re-sent calc/ops.py as it is" in w and "one that passes the tests" in w
        for w in resp.warnings
    )
    # asked from the conversation and the error the reply would have met, for the reply's
    # own tool alone
    asked = transport.requests[1]
    assert "nothing to change" in str(asked.messages[-1]["content"])
    assert asked.messages[-2] == {"role": "assistant", "content": change(CALC_BROKEN)["content"]}
    assert "run_command" not in json.dumps(asked.response_schema)
    # the no-op never ran: the only change made is the sample's
    changes = [e for e in resp.events if e.name == "replace_function"]
    assert [(e.arguments["code"], e.status) for e in changes] == [(CALC_FIXED, "done")]


@needs_bwrap
def test_a_sample_that_moves_a_stuck_failure_is_taken_and_the_model_goes_on(tmp_path: Path) -> None:
    resp, ops, _ = run_on_calc(
        tmp_path,
        [
            change(CALC_BROKEN),
            change(CALC_WRONG),  # a sample: another value at the same assert
            change(CALC_BROKEN),  # two samples that repeat the reply: no more are drawn
            change(CALC_BROKEN),
            change(CALC_FIXED),  # the model's next turn, after the tests ran on WRONG
        ],
    )
    assert resp.success, resp.error
    assert ops.read_text() == CALC_FIXED
    assert any("changes what the tests report" in w for w in resp.warnings)
    made = [e.arguments["code"] for e in resp.events if e.name == "replace_function"]
    assert made == [CALC_WRONG, CALC_FIXED]


@needs_bwrap
def test_when_no_sample_changes_anything_the_reply_runs_and_the_model_hears_why(
    tmp_path: Path,
) -> None:
    # samples that change nothing, but not the reply word for word: all are drawn
    script = [change(CALC_BROKEN), *[change(SPACED)] * SAMPLES, turn(answer="add is fine.")]
    resp, ops, transport = run_on_calc(tmp_path, script)
    assert ops.read_text() == CALC_BROKEN
    assert len(sampled(transport)) == SAMPLES
    assert any(f"none of {SAMPLES} replies" in w for w in resp.warnings)
    failed = [e for e in resp.events if e.name == "replace_function"]
    assert len(failed) == 1 and "nothing to change" in (failed[0].error or "")


@needs_bwrap
def test_a_model_set_on_its_reply_is_asked_no_more_in_that_run(tmp_path: Path) -> None:
    # every reply, the model's and the samples', is the code the file holds: once the samples
    # showed it set on its reply, a later re-send is run as it is (the spec suite drew the
    # same repeats again, 30-60 s each time)
    script = [change(CALC_BROKEN)] * (1 + SET_ON_IT + 3) + [turn(answer="done")]
    resp, _, transport = run_on_calc(tmp_path, script)
    assert len(sampled(transport)) == SET_ON_IT < SAMPLES
    assert sum(f"none of {SET_ON_IT} replies" in w for w in resp.warnings) == 1


@needs_bwrap
def test_the_model_is_asked_again_at_most_max_again_times_a_run(tmp_path: Path) -> None:
    # samples that change nothing, but not word for word the reply: all are drawn, each time
    rounds = [change(CALC_BROKEN), *[change(SPACED)] * SAMPLES] * MAX_AGAIN
    script = [*rounds, change(CALC_BROKEN), turn(answer="add is fine.")]
    resp, _, transport = run_on_calc(tmp_path, script)
    assert len(sampled(transport)) == SAMPLES * MAX_AGAIN
    assert sum(f"none of {SAMPLES} replies" in w for w in resp.warnings) == MAX_AGAIN


@needs_bwrap
@pytest.mark.parametrize(
    "made",
    [CALC_WRONG, CALC_WRONG + "\n"],  # the same change; one the file keeps without its blank
    ids=["the-same-call", "the-same-code"],
)
def test_a_change_the_tests_already_failed_sent_again_ends_the_run(
    tmp_path: Path, made: str
) -> None:
    # the repository suite's dead end: the model's change fails the tests, the model sends it
    # again, and again until the breaker; the samples asked again never passed the tests there
    # (nor is a fix asked for, shown the failing test: rune.assists.revise)
    script = [change(made), change(CALC_WRONG), change(CALC_WRONG), change(CALC_FIXED)]
    resp, ops, transport = run_on_calc(tmp_path, script, without=frozenset())
    assert ops.read_text() == CALC_WRONG
    assert len(transport.requests) == 2  # the model's two replies, nothing sampled
    assert resp.success and resp.incomplete
    assert resp.text == (
        "Stopped: the model sent its change to calc/ops.py (add) again, as the file already "
        "has it, and the project's tests fail with it."
    )
    changes = [(e.arguments["code"], e.status) for e in resp.events if e.name == "replace_function"]
    assert changes == [(made, "done"), (CALC_WRONG, "failed")]


def _event(tool: str, status: str, arguments: dict[str, Any] | None = None) -> ToolEvent:
    source = "rune" if tool == "run_tests" else "constrained"
    return ToolEvent(tool, arguments or {}, status, source)  # type: ignore[arg-type]


ADD_WRONG = {"path": "calc/ops.py", "name": "add", "code": CALC_WRONG}
TESTS_FAILED = _event("run_tests", "failed")


@pytest.mark.parametrize(
    ("events", "call", "judged"),
    [
        (
            [TESTS_FAILED, _event("replace_function", "done", ADD_WRONG), TESTS_FAILED],
            ADD_WRONG,
            "calc/ops.py (add)",
        ),
        # another function of the file: the tests never saw it changed
        (
            [TESTS_FAILED, _event("replace_function", "done", ADD_WRONG), TESTS_FAILED],
            {**ADD_WRONG, "name": "mul"},
            None,
        ),
        # the file read, never changed: the code the run started from
        (
            [TESTS_FAILED, _event("read_file", "done", {"path": "calc/ops.py"}), TESTS_FAILED],
            {"path": "calc/ops.py", "content": CALC_BROKEN},
            None,
        ),
        # the change was not made
        (
            [TESTS_FAILED, _event("replace_function", "failed", ADD_WRONG), TESTS_FAILED],
            ADD_WRONG,
            None,
        ),
        # no test run after it
        ([TESTS_FAILED, _event("replace_function", "done", ADD_WRONG)], ADD_WRONG, None),
    ],
    ids=["changed-then-failed", "other-function", "only-read", "not-made", "not-tested-since"],
)
def test_a_change_is_judged_when_the_tests_failed_after_the_run_changed_its_place(
    ws: Path, events: list[ToolEvent], call: dict[str, Any], judged: str | None
) -> None:
    state = LoopState(messages=[], protocol="constrained", events=list(events))
    name = "write_file" if "content" in call else "replace_function"
    assert judged_change(executor(ws), state, tool_request(name, call)) == judged
