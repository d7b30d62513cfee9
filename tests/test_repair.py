"""Sampled repair (rune.assists.repair): a change tried against a check before anyone
approves it, and the model's fresh-start alternatives put in place of a change its own failed
check rejects."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rune import events as ev
from rune.assists.repair import (
    CHARS_PER_TOKEN,
    FIRST_SEED,
    MAX_REPAIRS,
    SAMPLES,
    SIZE_FACTOR,
    SLACK,
    TEMPERATURE,
)
from rune.errors import ServerError
from rune.messages import ChatResult, Message
from rune.pause.state import PendingState
from rune.runtime.local_tool_runtime import LocalToolRuntime, ShapedRequest, repeat_message
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.scripted import ScriptedTransport

pytestmark = pytest.mark.bwrap
SOURCE = (
    'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    """a times b"""\n    return a * b\n'
)
BROKEN = "def add(a, b):\n    return a - b\n"
TIMES = "def add(a, b):\n    return a * b\n"
PLUS_ONE = "def add(a, b):\n    return a + b + 1\n"
FIXED = "def add(a, b):\n    return a + b\n"
TASK = [{"role": "user", "content": "add(2, 3) in calc.py should be 5. Fix it."}]
ASSERT_FIVE = {"code": "from calc import add\nassert add(2, 3) == 5, add(2, 3)"}


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


def change(code: str) -> dict[str, Any]:
    return turn(tool="replace_function", arguments={"path": "calc.py", "name": "add", "code": code})


def check(arguments: dict[str, str] = ASSERT_FIVE) -> dict[str, Any]:
    return turn(tool="run_python", arguments=arguments)


def approve_all(runtime: LocalToolRuntime, resp: Any) -> Any:
    while resp.pending is not None:
        # through JSON, as another process would: the repair's state goes with it
        state = PendingState.from_json(json.loads(json.dumps(resp.pending_state)))
        resp = runtime.approve(state)
    return resp


def sampled(transport: ScriptedTransport) -> list[int]:
    """The indexes of the calls that drew a sample."""
    return [
        i
        for i, r in enumerate(transport.requests)
        if r.options is not None and r.options.get("temperature") == TEMPERATURE
    ]


# --- trying a change --------------------------------------------------------------------------


def test_a_change_is_tried_on_a_copy_and_the_workspace_is_untouched(ws: Path) -> None:
    ex = executor(ws)
    before = sorted(p.name for p in ws.iterdir())
    fixed = ex.try_change(
        "replace_function", {"path": "calc.py", "name": "add", "code": FIXED}, "run_python",
        ASSERT_FIVE,
    )  # fmt: skip
    assert fixed is not None and fixed.passed and fixed.made
    wrong = ex.try_change(
        "replace_function", {"path": "calc.py", "name": "add", "code": TIMES}, "run_python",
        ASSERT_FIVE,
    )  # fmt: skip
    assert wrong is not None and not wrong.passed and wrong.made
    assert wrong.report.startswith("the check failed:\n") and "AssertionError: 6" in wrong.report
    # what run_python says about the file as it is, word for word
    own = ex.try_change(
        "replace_function", {"path": "calc.py", "name": "add", "code": BROKEN}, "run_python",
        ASSERT_FIVE,
    )  # fmt: skip
    assert own is not None and "AssertionError: -1" in own.report
    assert (ws / "calc.py").read_text() == SOURCE
    assert sorted(p.name for p in ws.iterdir()) == before


def test_the_content_a_rewrite_starts_from_is_read_only_where_a_change_may_write(
    ws: Path,
) -> None:
    # The path is the model's: a file it may not write (outside the workspace, or behind a
    # symlink that leads there) is never read for it.
    (ws.parent / "secret.py").write_text('def key():\n    """k"""\n    return 42\n')
    (ws / "link.py").symlink_to(ws.parent / "secret.py")
    tools = executor(ws)
    assert tools.content_before_changes("calc.py") == SOURCE.encode()  # as it is now
    for hostile in ("../secret.py", str(ws.parent / "secret.py"), "link.py", "missing.py"):
        assert tools.content_before_changes(hostile) is None, hostile
    tools.apply(
        tools.prepare("replace_function", {"path": "calc.py", "name": "add", "code": FIXED})
    )
    assert "a + b" in (ws / "calc.py").read_text()
    assert tools.content_before_changes("calc.py") == SOURCE.encode()  # as it was


def test_a_change_that_cannot_be_made_is_not_run(ws: Path) -> None:
    # write_file that drops mul(): refused before any check runs
    trial = executor(ws).try_change(
        "write_file", {"path": "calc.py", "content": FIXED}, "run_python", ASSERT_FIVE
    )
    assert trial is not None and not trial.made and not trial.passed
    assert "leaves out mul()" in trial.report


@pytest.mark.parametrize(
    ("name", "arguments", "check_name"),
    [
        ("write_file", {"path": "new.py", "content": FIXED}, "run_python"),  # no file yet
        ("run_command", {"command": "true"}, "run_python"),  # not a file change
        ("replace_function", {"path": "calc.py", "name": "add", "code": FIXED}, "read_file"),
    ],
)
def test_what_cannot_be_tried_that_way_says_so(
    ws: Path, name: str, arguments: dict[str, Any], check_name: str
) -> None:
    check_args = ASSERT_FIVE if check_name == "run_python" else {"path": "calc.py"}
    assert executor(ws).try_change(name, arguments, check_name, check_args) is None
    assert executor(ws).try_change("replace_function", arguments, "run_python", {}) is None


@pytest.mark.bwrap
def test_a_check_without_an_assert_proves_nothing_and_fails(ws: Path) -> None:
    from rune.errors import ToolError, ToolInputError

    code = {"code": "import calc; print(calc.add(2, 3))"}
    with pytest.raises(ToolError, match="asserts nothing") as caught:
        executor(ws).run("run_python", code)
    assert not isinstance(caught.value, ToolInputError)  # it ran: the model sees what printed
    assert "It printed:\n-1\n[exit code 0]" in str(caught.value)
    assert str(caught.value).endswith(
        "assert calc.add(2, 3) == (the value the task or the docstring asks for)."
    )
    # nor can it judge a change: no trial of it is made
    change = {"path": "calc.py", "name": "add", "code": FIXED}
    assert executor(ws).try_change("replace_function", change, "run_python", code) is None


# --- the repair in the loop -------------------------------------------------------------------


def test_a_change_the_failed_check_rejects_gives_way_to_a_sample_that_passes(ws: Path) -> None:
    transport = ScriptedTransport(
        [
            change(TIMES),
            check(),
            change(TIMES),  # the same wrong change again: its own check fails it
            change(TIMES),  # sample 1: what was tried already, not tried again
            change(PLUS_ONE),  # sample 2: fails the check
            change(FIXED),  # sample 3: passes, and takes the reply's place
            check(),
            turn(answer="add() adds."),
        ]
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.success and resp.text == "add() adds." and resp.incomplete is None
    assert "def add(a, b):\n    return a + b\n" in (ws / "calc.py").read_text()
    assert [(e.name, e.status) for e in resp.events] == [
        ("replace_function", "done"),
        ("run_python", "failed"),
        ("replace_function", "done"),
        ("run_python", "done"),
    ]
    assert resp.events[2].arguments["code"] == FIXED
    assert sampled(transport) == [3, 4, 5]
    samples = [transport.requests[i] for i in sampled(transport)]
    # from a fresh start: the system context and the request, nothing of the run
    assert [m["role"] for m in samples[0].messages] == ["system", "user"]
    assert samples[0].messages[-1]["content"] == TASK[0]["content"]
    assert [r.options["seed"] for r in samples] == [FIRST_SEED, FIRST_SEED + 1, FIRST_SEED + 2]
    # each sample may be about twice the change it replaces, not the run's whole output cap
    own = len(change(TIMES)["content"]) // CHARS_PER_TOKEN
    assert {r.options["num_predict"] for r in samples} == {SIZE_FACTOR * own + SLACK}
    # file changes only: a command cannot be tried over a copy of the files
    forms = samples[0].response_schema["anyOf"]
    assert {f["properties"]["tool"]["enum"][0] for f in forms} == {
        "replace_function",
        "edit_file",
        "write_file",
        "format_code",
    }
    # the conversation holds the change that was made, as the model's own reply
    replies = [m for m in resp.messages if m["role"] == "assistant"]
    assert json.loads(replies[2]["content"])["arguments"]["code"] == FIXED
    assert any("this one passes that check" in w for w in resp.warnings)
    assert resp.iterations_used == 5  # samples belong to the step they repair


class CountingShaper:
    """A shaper that fits nothing and counts what it is shown: what a budget would see."""

    def __init__(self) -> None:
        self.shaped: list[int] = []
        self.observed = 0

    def shape(
        self, model: str, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] = ()
    ) -> ShapedRequest:
        self.shaped.append(len(messages))
        return ShapedRequest(messages)

    def observe(self, shaped: ShapedRequest, result: ChatResult) -> None:
        self.observed += 1


def test_a_sample_never_may_take_more_than_the_runs_own_output_cap(ws: Path) -> None:
    transport = ScriptedTransport(
        [*(change(TIMES), check(), change(TIMES)), change(FIXED), check(), turn(answer="ok")]
    )
    runtime = LocalToolRuntime(
        transport, executor(ws), model="m", protocol="constrained", options={"num_predict": 64}
    )
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.success and sampled(transport) == [3]
    assert transport.requests[3].options["num_predict"] == 64


def test_the_samples_are_model_calls_the_budget_and_the_events_see(ws: Path) -> None:
    transport = ScriptedTransport(
        [
            *(change(TIMES), check(), change(TIMES)),
            *(change(TIMES), change(PLUS_ONE), change(FIXED)),  # the samples
            *(check(), turn(answer="add() adds.")),
        ]
    )
    shaper, seen = CountingShaper(), list[ev.LoopEvent]()
    runtime = LocalToolRuntime(
        transport,
        executor(ws),
        model="m",
        protocol="constrained",
        shaper=shaper,
        on_event=seen.append,
    )
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.success and sampled(transport) == [3, 4, 5]
    calls = [(e.assist, e.iteration) for e in seen if isinstance(e, ev.AssistModelCall)]
    assert calls == [("repair", 3)] * 3
    # every model call's prompt is observed, the samples' too (shaped once: one fresh start)
    assert shaper.observed == len(transport.requests) == 8
    assert len(shaper.shaped) == 5 + 1 and shaper.shaped[3] == 2  # the system prompt, the task


def test_no_sample_is_drawn_without_a_failed_check_or_for_a_change_that_passes(ws: Path) -> None:
    transport = ScriptedTransport(
        [change(TIMES), change(PLUS_ONE), check(), change(FIXED), check(), turn(answer="ok")]
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.success and sampled(transport) == []
    assert len(transport.requests) == 6


def test_one_repair_per_run_and_the_reply_stays_when_no_sample_does_better(ws: Path) -> None:
    assert MAX_REPAIRS == 1
    transport = ScriptedTransport(
        [
            change(TIMES),
            check(),
            change(PLUS_ONE),  # fails the check: a repair is tried
            *[change(PLUS_ONE)] * SAMPLES,  # no sample does better (all the same)
            check(),
            change(TIMES),  # fails again: no second repair
            check(),
            turn(answer="gave up"),
            turn(answer="gave up"),  # an answer right after a failed check is sent back once
        ]
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.success and resp.incomplete == "the model's own check of its change failed"
    assert len(sampled(transport)) == SAMPLES
    assert [e.arguments.get("code") for e in resp.events if e.name == "replace_function"] == [
        TIMES,
        PLUS_ONE,
        TIMES,
    ]


def test_a_stuck_model_gets_a_sample_that_moves_a_check_that_cannot_pass(ws: Path) -> None:
    # Its check is too strict for any fix (a float compared with ==), and it keeps sending a
    # change that leaves the check's report as it was.
    strict = {"code": "from calc import add\nassert add(2, 3) == 5.0001, add(2, 3)"}
    transport = ScriptedTransport(
        [
            change(BROKEN),  # changes nothing: refused
            check(strict),
            change(BROKEN),  # again: the report stays "-1"
            turn(tool="write_file", arguments={"path": "calc.py", "content": FIXED}),  # drops mul
            change(FIXED),  # moves the report to "5": offered
            *[change(PLUS_ONE)] * (SAMPLES - 2),
            check(strict),
            turn(answer="add() adds; the check may be too strict."),
            turn(answer="add() adds; the check may be too strict."),
        ]
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(runtime, runtime.run(TASK))
    assert "return a + b\n" in (ws / "calc.py").read_text()
    assert "def mul" in (ws / "calc.py").read_text()
    assert any("changes what the check reports" in w for w in resp.warnings)
    assert resp.incomplete == "the model's own check of its change failed"


def test_a_server_error_while_sampling_keeps_the_models_reply(ws: Path) -> None:
    transport = ScriptedTransport(
        [
            change(TIMES),
            check(),
            change(PLUS_ONE),
            ServerError("the server went away"),
            check(),
            turn(answer="done"),
            turn(answer="done"),
        ]
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.success and resp.incomplete == "the model's own check of its change failed"
    assert any("could not ask the model for other changes" in w for w in resp.warnings)
    assert resp.events[2].arguments["code"] == PLUS_ONE


def test_a_check_the_old_code_passes_shows_no_bug_and_picks_nothing(ws: Path) -> None:
    # The model asserted the buggy behaviour: its check fails the right fix, and would pick a
    # wrong change over it. The code as it was passes that check, so no sample is drawn.
    buggy = {"code": "from calc import add\nassert add(2, 3) == -1, add(2, 3)"}
    assert samples_when_stuck(ws, FIXED, buggy) == []
    assert "return a + b\n" in (ws / "calc.py").read_text()


def test_the_old_code_is_tried_with_each_changed_file_as_it_was(ws: Path) -> None:
    ex = executor(ws)
    assert ex.try_before_changes("run_python", ASSERT_FIVE).passed is False  # nothing changed
    ex.apply(ex.prepare("replace_function", {"path": "calc.py", "name": "add", "code": FIXED}))
    ex.apply(ex.prepare("replace_function", {"path": "calc.py", "name": "add", "code": TIMES}))
    minus_one = {"code": "from calc import add\nassert add(2, 3) == -1, add(2, 3)"}
    assert ex.try_before_changes("run_python", minus_one).passed  # the first content counts
    assert ex.try_change(
        "replace_function", {"path": "calc.py", "name": "add", "code": FIXED}, "run_python",
        ASSERT_FIVE,
    ).passed  # fmt: skip
    assert "return a * b\n" in (ws / "calc.py").read_text()
    ex.apply(ex.prepare("write_file", {"path": "new.py", "content": "X = 1\n"}))
    assert ex.try_before_changes("run_python", minus_one) is None  # a file created since


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (
            "from calc import add\nassert add(2, 3) == math.floor(5.5)",
            "[the NameError is in the check's own code, not in the project: fix the check]",
        ),
        (
            "from calcs import add\nassert add(2, 3) == 5, add(2, 3)",
            "[the workspace has no module calcs, but it has calc: fix the check's import]",
        ),
    ],
    ids=["a name it never imported", "a misspelt module"],
)
def test_a_check_broken_in_its_own_code_says_so_and_picks_nothing(
    ws: Path, code: str, says: str
) -> None:
    broken = {"code": code}
    trial = executor(ws).try_before_changes("run_python", broken)
    assert trial is not None and trial.own_fault and not trial.asserted
    assert trial.report.endswith(says)
    assert samples_when_stuck(ws, TIMES, broken) == []


def test_an_error_of_the_project_is_not_the_checks_own(ws: Path) -> None:
    # a NameError the project's code raises
    (ws / "calc.py").write_text("def add(a, b):\n    return a + c\n")
    trial = executor(ws).try_before_changes("run_python", ASSERT_FIVE)
    assert trial is not None and not trial.own_fault and "NameError" in trial.report
    # a module nothing in the workspace is close to (one the task may ask for)
    missing = {"code": "from parsing import parse\nassert parse('1') == 1"}
    trial = executor(ws).try_before_changes("run_python", missing)
    assert trial is not None and not trial.own_fault and "No module named 'parsing'" in trial.report


def test_no_sample_is_drawn_when_the_check_fails_in_its_own_code_after_the_change(
    ws: Path,
) -> None:
    # The code as it was fails before the check's own error is reached; the change does not.
    (ws / "calc.py").write_text("def add(a, b):\n    return a + c\n")
    late = {"code": "from calc import add\nassert add(2, 3) == math.floor(5.5)"}
    assert samples_when_stuck(ws, FIXED, late) == []


def samples_when_stuck(ws: Path, code: str, check_args: dict[str, str]) -> list[int]:
    """The sampling calls of a run where the model sends ``code``, its check fails, and it
    sends the same change again (then answers)."""
    transport = ScriptedTransport(
        [
            change(code),
            check(check_args),
            change(code),
            check(check_args),
            turn(answer="done"),
            turn(answer="done"),  # an answer right after a failed check is sent back once
        ]
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(runtime, runtime.run(TASK))
    # Unrepaired, the stuck model's same failing check after its no-op change stops the run
    # (two failing calls taking turns, docs/loop.md); repaired, it goes on and answers.
    assert resp.success or resp.error == repeat_message("run_python", 2), resp.error
    return sampled(transport)
