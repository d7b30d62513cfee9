"""Ask again when a change changes nothing (rune.assists.again): a reply that re-sends what the
file holds is not run; a sampled reply from the same conversation that changes something takes
its place, the one the tests pick where Rune runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.test_test_driven import BROKEN as CALC_BROKEN
from tests.test_test_driven import FIXED as CALC_FIXED
from tests.test_test_driven import TASK as CALC_TASK
from tests.test_test_driven import WRONG as CALC_WRONG
from tests.test_test_driven import calc_project, needs_bwrap

from rune.assists import standard_assists
from rune.assists.again import MAX_AGAIN, SAMPLES, changes_nothing
from rune.assists.repair import TEMPERATURE
from rune.calls import tool_request
from rune.errors import NothingToChange
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.testing import auto_check
from rune.transport.scripted import ScriptedTransport

SOURCE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
AS_IT_IS = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TASK = [{"role": "user", "content": "add(2, 3) in calc.py should be 5. Fix it."}]
CHECK = "from calc import add\nassert add(2, 3) == 5, add(2, 3)"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "calc.py").write_text(SOURCE)
    return path


def executor(ws: Path) -> ToolExecutor:
    return ToolExecutor(SandboxPolicy.default(home=ws.parent), ws)


def turn(**fields: Any) -> dict[str, Any]:
    return {"content": json.dumps(fields)}


def change(code: str, path: str = "calc.py") -> dict[str, Any]:
    return turn(tool="replace_function", arguments={"path": path, "name": "add", "code": code})


def approve_all(loop: LocalToolRuntime, resp: Any) -> Any:
    while resp.pending is not None:
        resp = loop.approve(resp.pending_state)
    return resp


def sampled(transport: ScriptedTransport) -> list[int]:
    return [
        i
        for i, r in enumerate(transport.requests)
        if r.options is not None and r.options.get("temperature") == TEMPERATURE
    ]


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


def test_a_reply_that_changes_nothing_gives_way_to_a_sample_that_changes_something(
    ws: Path,
) -> None:
    transport = ScriptedTransport(
        [
            change(AS_IT_IS),  # the model's reply: the function as the file has it
            change(AS_IT_IS),  # a sample that changes nothing either: skipped
            turn(tool="run_command", arguments={"command": "rm calc.py"}),  # not an edit
            change(FIXED),  # the next sample: taken
            turn(tool="run_python", arguments={"code": CHECK}),
            turn(answer="Fixed add."),
        ],
        tools=True,
    )
    loop = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(loop, loop.run(list(TASK)))
    assert resp.success, resp.error
    assert (ws / "calc.py").read_text() == SOURCE.replace("a - b", "a + b")
    assert sampled(transport) == [1, 2, 3]
    # only the reply's own tool is asked for: a sample is an edit made otherwise
    assert "run_command" not in json.dumps(transport.requests[1].response_schema)
    # the samples were asked from the conversation and the error the reply would have met
    asked = transport.requests[1].messages
    assert "nothing to change" in str(asked[-1]["content"])
    assert asked[-2] == {"role": "assistant", "content": change(AS_IT_IS)["content"]}
    assert any("re-sent calc.py as it is" in w and "of 3 replies" in w for w in resp.warnings)
    # the no-op never ran: the only change event is the sample's
    changes = [e for e in resp.events if e.name == "replace_function"]
    assert [e.arguments["code"] for e in changes] == [FIXED] and changes[0].status == "done"


def test_when_no_sample_changes_anything_the_reply_runs_and_the_model_hears_why(
    ws: Path,
) -> None:
    script = [change(AS_IT_IS)] * (1 + SAMPLES) + [turn(answer="add is fine as it is.")]
    transport = ScriptedTransport(script, tools=True)
    loop = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(loop, loop.run(list(TASK)))
    assert (ws / "calc.py").read_text() == SOURCE
    assert len(sampled(transport)) == SAMPLES
    assert any(f"none of {SAMPLES} replies" in w for w in resp.warnings)
    failed = [e for e in resp.events if e.name == "replace_function"]
    assert len(failed) == 1 and "nothing to change" in (failed[0].error or "")


def test_it_asks_again_at_most_max_again_times_a_run(ws: Path) -> None:
    # every reply, the model's and the samples', changes nothing
    noop = change(AS_IT_IS)
    script = [noop] * ((1 + SAMPLES) * MAX_AGAIN + 1) + [turn(answer="done")]
    transport = ScriptedTransport(script, tools=True)
    loop = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    approve_all(loop, loop.run(list(TASK)))
    assert len(sampled(transport)) == SAMPLES * MAX_AGAIN


@needs_bwrap
def test_where_rune_runs_the_tests_they_pick_the_sample(tmp_path: Path) -> None:
    ws = calc_project(tmp_path / "ws")
    tools = executor(ws)
    # the sampled repair left out, so this assist meets the reply alone
    assists = standard_assists(
        auto_checks=lambda request: auto_check(request, tools.workspace, tools.policy),
        without=frozenset({"repair"}),
    )
    transport = ScriptedTransport(
        [
            change(CALC_BROKEN, "calc/ops.py"),  # the function as the file has it
            change(CALC_WRONG, "calc/ops.py"),  # changes something, fails the same test
            change(CALC_FIXED, "calc/ops.py"),  # passes
        ],
        tools=True,
    )
    loop = LocalToolRuntime(transport, tools, model="m", protocol="constrained", assists=assists)
    resp = approve_all(loop, loop.run([{"role": "user", "content": CALC_TASK}]))
    assert resp.success, resp.error
    assert (ws / "calc" / "ops.py").read_text() == CALC_FIXED
    assert sampled(transport) == [1, 2]
    assert any("one that passes the tests" in w for w in resp.warnings)
