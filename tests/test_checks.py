"""run_python: a check that runs without approval because the sandbox leaves it nothing to change;
and the constrained protocol's rule that a change is checked before the model may answer."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import rune
from tests.fakes.ollama_server import FakeModel, FakeOllama, text_reply

from rune.assists import standard_assists
from rune.assists.check import SHOWS_NOTHING
from rune.cli import EXIT_OK
from rune.errors import ToolError, ToolInputError
from rune.formats.constrained import constrained_prompt, turn_schema
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.text import NO_OUTPUT
from rune.tools.checks import MAX_CODE_CHARS
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.scripted import ScriptedTransport

needs_bwrap = pytest.mark.bwrap
BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TASK = [{"role": "user", "content": "add(2, 3) in calc.py should be 5. Fix it."}]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "calc.py").write_text(BROKEN)
    return path


def executor(ws: Path, contain: bool | None = None) -> ToolExecutor:
    """As ``rune`` runs: home (here the test's directory) is readable, the workspace writable."""
    return ToolExecutor(SandboxPolicy.default(home=ws.parent), ws, contain_commands=contain)


def check(ws: Path, code: str) -> str:
    """A passing check's output."""
    return executor(ws).run("run_python", {"code": code})


def failed_check(ws: Path, code: str) -> str:
    """A failing check's error (what the model reads)."""
    with pytest.raises(ToolError) as caught:
        check(ws, code)
    assert str(caught.value).startswith("the check failed:\n")
    return str(caught.value)


# --- the tool ---------------------------------------------------------------------------------


@needs_bwrap
def test_it_runs_the_projects_code_without_approval(ws: Path) -> None:
    ex = executor(ws)
    assert "run_python" in [s.name for s in ex.specs()]
    assert not ex.is_mutating("run_python")
    assert check(
        ws, "from calc import add\nprint(add(2, 3))\nassert add(2, 3) == -1"
    ).splitlines() == [
        "-1",
        "[exit code 0]",
    ]


@needs_bwrap
def test_a_check_of_many_asserts_is_not_cut_but_an_endless_one_is_refused(ws: Path) -> None:
    """A check of a dozen asserts (about 700 characters) runs whole: the cap was once 500 and
    cut such checks mid-expression; a reply that repeats itself is stopped as it streams."""
    asserts = "".join(
        f"assert add({n}, {n}) == {-n} or True, 'add of {n} and {n}'\n" for n in range(14)
    )
    code = "from calc import add\n" + asserts
    assert 600 < len(code) <= MAX_CODE_CHARS
    assert check(ws, code).endswith("[exit code 0]")
    with pytest.raises(ToolInputError, match="keep a check short"):
        check(ws, "assert True\n" * (MAX_CODE_CHARS // 12 + 1))
    (schema,) = [s.parameters for s in executor(ws).specs() if s.name == "run_python"]
    assert schema["properties"]["code"]["maxLength"] == MAX_CODE_CHARS


@needs_bwrap
def test_it_cannot_change_the_workspace_or_leave_anything_in_it(ws: Path) -> None:
    out = failed_check(ws, "open('calc.py', 'w').write('x')\nassert open('calc.py').read() == 'x'")
    assert "Read-only file system" in out and "[exit code 1]" in out
    out = failed_check(
        ws,
        "import pathlib; pathlib.Path('new.txt').write_text('x')\n"
        "assert pathlib.Path('new.txt').exists()",
    )
    assert "Read-only file system" in out
    assert sorted(p.name for p in ws.iterdir()) == ["calc.py"]  # no __pycache__ either
    assert (ws / "calc.py").read_text() == BROKEN


@needs_bwrap
def test_it_cannot_reach_a_server_on_the_host(ws: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        out = failed_check(
            ws,
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)\n"
            "assert False, 'connected'",
        )
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()
    assert "Error" in out and "[exit code 1]" in out


@needs_bwrap
def test_it_sees_no_secret_from_the_environment(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    out = check(
        ws,
        "import os\nkeys = sorted(k for k in os.environ if 'KEY' in k)\n"
        "print(keys)\nassert keys == []",
    )
    assert out.splitlines()[0] == "[]"
    assert os.environ["OPENAI_API_KEY"] == "sk-do-not-leak"


@needs_bwrap
def test_a_check_that_hangs_is_stopped(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rune.tools.checks.CHECK_TIMEOUT", 1)
    assert "timed out after 1 s" in failed_check(ws, "while True: pass\nassert False")


@needs_bwrap
def test_a_failed_assertion_fails_the_check_with_its_message(ws: Path) -> None:
    out = failed_check(ws, "from calc import add\nassert add(2, 3) == 5, add(2, 3)")
    assert "AssertionError: -1" in out and out.endswith("[exit code 1]")


@needs_bwrap
def test_a_check_that_only_prints_fails_with_what_it_printed_and_how_to_assert(ws: Path) -> None:
    # Refused unseen, the 1.5B sent the same printing check again until the breaker stopped.
    with pytest.raises(ToolError) as caught:
        check(ws, "from calc import add\nprint(add(2, 3))")
    out = str(caught.value)
    assert out.startswith("a check must assert what the code should do; this code asserts nothing.")
    assert "It printed:\n-1\n[exit code 0]\n" in out
    assert out.endswith("assert add(2, 3) == (the value the task or the docstring asks for).")
    with pytest.raises(ToolError) as caught:
        check(ws, "x = 'assertion'")
    assert f"It printed:\n{NO_OUTPUT}\n[exit code 0]\n" in str(caught.value)
    assert str(caught.value).endswith("e.g. assert add(2, 3) == 5.")  # no print to build on


@pytest.mark.parametrize("code", ["", "   ", "assert 1\0", "assert 1\n" * 200])
@needs_bwrap
def test_bad_code_is_a_typed_input_error(ws: Path, code: str) -> None:
    from rune.errors import ToolInputError

    with pytest.raises(ToolInputError):
        check(ws, code)


def test_it_is_not_offered_where_commands_run_uncontained(ws: Path) -> None:
    ex = executor(ws, contain=False)
    assert "run_python" not in [s.name for s in ex.specs()]
    assert "run_python" not in constrained_prompt(ex.specs())


@needs_bwrap
def test_it_is_not_offered_when_the_model_may_read_only_the_workspace(ws: Path) -> None:
    # A contained run reads more than the workspace (secrets masked), so a workspace-only
    # policy gets no unapproved check.
    ex = ToolExecutor(SandboxPolicy.workspace_only(ws), ws)
    assert "run_python" not in [s.name for s in ex.specs()]
    assert "run_python" in [s.name for s in executor(ws).specs()]


# --- the rule: check before answering -----------------------------------------------------------


def turn(**fields: Any) -> dict[str, Any]:
    return {"content": json.dumps(fields)}


def fix() -> dict[str, Any]:
    return turn(
        tool="replace_function", arguments={"path": "calc.py", "name": "add", "code": FIXED}
    )


def schemas(transport: ScriptedTransport) -> list[bool]:
    """For each model call: whether the answer form was allowed."""
    return [
        any("answer" in form["properties"] for form in r.response_schema["anyOf"])
        for r in transport.requests
        if r.response_schema is not None
    ]


def approve_all(runtime: LocalToolRuntime, resp: Any) -> Any:
    while resp.pending is not None:
        resp = runtime.approve(resp.pending_state)
    return resp


@needs_bwrap
def test_after_a_change_the_model_may_answer_only_once_it_has_checked(ws: Path) -> None:
    transport = ScriptedTransport(
        [
            fix(),
            turn(
                tool="run_python",
                arguments={
                    "code": "import calc; print(calc.add(2, 3)); assert calc.add(2, 3) == 5"
                },
            ),
            turn(answer="add() adds."),
        ],
        tools=True,
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.success and resp.text == "add() adds."
    assert schemas(transport) == [True, False, True]
    assert [(e.name, e.status) for e in resp.events] == [
        ("replace_function", "done"),
        ("run_python", "done"),
    ]
    change_result = str(transport.requests[1].messages[-1]["content"])
    assert "Before you answer, run run_python to check the code as it is now." in change_result
    assert "5\n[exit code 0]" in str(transport.requests[2].messages[-1]["content"])
    assert "Before you answer" not in str(transport.requests[2].messages[-1]["content"])
    executor_specs = executor(ws).specs()
    assert transport.requests[1].response_schema == turn_schema(executor_specs, answer=False)


@needs_bwrap
def test_a_failed_change_needs_a_check_too_and_a_rejected_one_does_not(ws: Path) -> None:
    same = turn(
        tool="replace_function", arguments={"path": "calc.py", "name": "add", "code": BROKEN}
    )
    unchecked = turn(answer="no change needed")
    transport = ScriptedTransport([same, unchecked, unchecked], tools=True)
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = runtime.run(TASK)
    # (A server that ignores the grammar may still answer; the answer after a failed change is
    # sent back once, and the check is still owed on that turn.)
    assert resp.success and schemas(transport) == [True, False, False]

    transport = ScriptedTransport([fix(), turn(answer="as you wish")], tools=True)
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    paused = runtime.run(TASK)
    resp = runtime.reject(paused.pending_state, reason="not like that")
    assert resp.success and schemas(transport) == [True, True]


def test_without_a_check_tool_there_is_no_rule(ws: Path) -> None:
    transport = ScriptedTransport([fix(), turn(answer="done")], tools=True)
    runtime = LocalToolRuntime(
        transport, executor(ws, contain=False), model="m", protocol="constrained"
    )
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.success and schemas(transport) == [True, True]
    assert (ws / "calc.py").read_text() == FIXED


@needs_bwrap
def test_the_prompt_shows_the_check_in_its_worked_example(ws: Path) -> None:
    prompt = constrained_prompt(executor(ws).specs())
    assert "check it with run_python" in prompt
    lines = prompt.splitlines()
    calls = [
        json.loads(line) for line in lines if line.startswith('{"tool": "') and "<" not in line
    ]
    assert [c["tool"] for c in calls] == ["replace_function", "run_python"]


ASSERT_FIVE = {"code": "from calc import add\nassert add(2, 3) == 5, add(2, 3)"}


@needs_bwrap
def test_a_failed_check_must_be_acted_on_and_a_passing_one_ends_the_task(ws: Path) -> None:
    wrong = "def add(a, b):\n    return a * b\n"
    transport = ScriptedTransport(
        [
            turn(
                tool="replace_function", arguments={"path": "calc.py", "name": "add", "code": wrong}
            ),
            turn(tool="run_python", arguments=ASSERT_FIVE),
            fix(),
            turn(tool="run_python", arguments=ASSERT_FIVE),
            turn(answer="add() adds."),
        ],
        tools=True,
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.success and resp.text == "add() adds." and resp.incomplete is None
    assert (ws / "calc.py").read_text() == FIXED
    # no answer form: after the change, after the failed check, after the second change
    assert schemas(transport) == [True, False, False, False, True]
    assert [(e.name, e.status) for e in resp.events] == [
        ("replace_function", "done"),
        ("run_python", "failed"),
        ("replace_function", "done"),
        ("run_python", "done"),
    ]
    assert "AssertionError: 6" in str(transport.requests[2].messages[-1]["content"])


@needs_bwrap
def test_after_two_failed_checks_the_model_may_answer_and_is_told_once(ws: Path) -> None:
    # Its own expectation may be wrong: the answer is not withheld for ever.
    other = {"code": "from calc import add\nassert add(1, 1) == 2, add(1, 1)"}
    transport = ScriptedTransport(
        [
            turn(tool="run_python", arguments=ASSERT_FIVE),
            turn(tool="run_python", arguments=other),
            turn(answer="add() is fixed."),  # right after a failed check: sent back, once
            turn(answer="add() is fixed."),
        ],
        tools=True,
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = runtime.run(TASK)
    assert resp.success and resp.incomplete == "the model's own check of its change failed"
    assert schemas(transport) == [True, False, True, True]
    note = str(transport.requests[3].messages[-1]["content"])
    assert note.startswith("Your last check failed: the check failed:")
    assert "The task is not finished." in note


@needs_bwrap
def test_a_check_cannot_read_a_credential_store_in_home(ws: Path) -> None:
    # The test's home is ws.parent (see executor): its ~/.ssh and ~/.aws are masked.
    (ws.parent / ".ssh").mkdir()
    (ws.parent / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    (ws.parent / ".aws").mkdir()
    (ws.parent / ".aws" / "credentials").write_text("aws_secret_access_key = s3cr3t")
    code = (
        "import pathlib\n"
        "for p in ['.ssh/id_rsa', '.aws/credentials']:\n"
        "    f = pathlib.Path('..', p)\n"
        "    print(p, f.exists() and f.read_text())\n"
        "assert not pathlib.Path('..', '.ssh/id_rsa').exists()"
    )
    out = check(ws, code)
    assert "PRIVATE KEY" not in out and "s3cr3t" not in out
    assert ".ssh/id_rsa False" in out


@needs_bwrap
def test_nothing_a_check_starts_outlives_it(ws: Path) -> None:
    token = "rune-check-survivor-7f3a"
    code = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', '{token}'],"
        " start_new_session=True)\n"
        "print('started')\n"
        "assert True, 'the check must assert something'"
    )
    assert check(ws, code).startswith("started")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and survivors(token):
        time.sleep(0.1)
    assert survivors(token) == []


def survivors(token: str) -> list[str]:
    """Host processes whose command line holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and token in (entry / "cmdline").read_text():
                found.append(entry.name)
        except OSError:
            continue
    return found


# --- a check that shows the change ends the run (the ``rune`` command's assists) ------------


def proof_runtime(
    ws: Path, script: list[dict[str, Any]], *also: Assist, without: frozenset[str] = frozenset()
) -> Any:
    transport = ScriptedTransport(script, tools=True)
    assists = [*standard_assists(ends_on_proof=True, without=without), *also]
    runtime = LocalToolRuntime(
        transport, executor(ws), model="m", protocol="constrained", assists=assists
    )
    return transport, approve_all(runtime, runtime.run(TASK))


@needs_bwrap
def test_a_check_that_shows_the_change_ends_the_run_with_runes_answer(ws: Path) -> None:
    wrong = "def add(a, b):\n    return a * b\n"
    script = [
        turn(tool="replace_function", arguments={"path": "calc.py", "name": "add", "code": wrong}),
        turn(tool="run_python", arguments=ASSERT_FIVE),  # fails: 6
        fix(),
        turn(tool="run_python", arguments=ASSERT_FIVE),  # passes now, failed on a - b
        turn(answer="never asked for"),
    ]
    transport, resp = proof_runtime(ws, script)
    assert resp.success and resp.incomplete is None
    assert resp.text == (
        "Changed calc.py: the check run after the change passes, and it fails on the code as "
        "it was."
    )
    assert len(transport.requests) == 4  # no answer turn
    assert (ws / "calc.py").read_text() == FIXED


@needs_bwrap
def test_a_check_that_passes_on_the_old_code_too_does_not_end_the_run(ws: Path) -> None:
    # add(0, 0) is 0 with a - b as well: it shows nothing of the change
    zero = {"code": "from calc import add\nassert add(0, 0) == 0"}
    script = [fix(), turn(tool="run_python", arguments=zero), turn(answer="add() adds.")]
    transport, resp = proof_runtime(ws, script)
    assert resp.success and resp.text == "add() adds." and resp.incomplete == SHOWS_NOTHING
    assert len(transport.requests) == 3


@needs_bwrap
def test_a_check_moved_to_fit_the_code_does_not_end_the_run(ws: Path) -> None:
    wrong = "def add(a, b):\n    return a * b\n"
    six = {"code": "from calc import add\nassert add(2, 3) == 6, add(2, 3)"}
    script = [
        turn(tool="run_python", arguments=ASSERT_FIVE),  # fails on a - b: -1
        turn(tool="replace_function", arguments={"path": "calc.py", "name": "add", "code": wrong}),
        turn(tool="run_python", arguments=six),  # passes on a * b, fails on a - b
        turn(answer="add() is right now."),
    ]
    # (without the sampled repair, which would try the change against the failed check first)
    transport, resp = proof_runtime(ws, script, without=frozenset({"repair"}))
    assert resp.text == "add() is right now." and len(transport.requests) == 4
    assert resp.incomplete is not None and "changed what its check expects" in resp.incomplete


class _Unfinished(Assist):
    """Another assist's reason to call the task unfinished (as ``rewrite``'s is for a function
    it wrote afresh that only the model's own check tried)."""

    name = "unfinished-for-the-test"

    def unfinished(self, loop: Loop, state: LoopState) -> str | None:
        return "another assist's reason"


@needs_bwrap
def test_another_assists_reason_keeps_the_run_going_to_the_models_answer(ws: Path) -> None:
    script = [fix(), turn(tool="run_python", arguments=ASSERT_FIVE), turn(answer="add() adds.")]
    transport, resp = proof_runtime(ws, script, _Unfinished())
    assert resp.text == "add() adds." and resp.incomplete == "another assist's reason"
    assert len(transport.requests) == 3


@needs_bwrap
def test_a_library_callers_loop_still_ends_on_the_models_answer(ws: Path) -> None:
    transport = ScriptedTransport(
        [fix(), turn(tool="run_python", arguments=ASSERT_FIVE), turn(answer="add() adds.")],
        tools=True,
    )
    runtime = LocalToolRuntime(transport, executor(ws), model="m", protocol="constrained")
    resp = approve_all(runtime, runtime.run(TASK))
    assert resp.text == "add() adds." and resp.incomplete is None
    assert len(transport.requests) == 3


@needs_bwrap
def test_rune_run_ends_on_the_check_that_shows_the_change(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "proj").mkdir(parents=True)
    (home / "proj" / "calc.py").write_text(BROKEN)
    fixed = {
        "tool": "replace_function",
        "arguments": {"path": "calc.py", "name": "add", "code": FIXED},
    }
    checked = {"tool": "run_python", "arguments": ASSERT_FIVE}
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        server.script(text_reply(json.dumps(fixed)), text_reply(json.dumps(checked)))
        done = rune(
            home,
            "run",
            "--workspace",
            str(home / "proj"),
            "--protocol",
            "constrained",
            "--yes",
            str(TASK[0]["content"]),
            env={"OLLAMA_HOST": server.url},
        )
        assert server.count("/api/chat") == 2
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert (home / "proj" / "calc.py").read_text() == FIXED
    assert "Changed calc.py: the check run after the change passes" in done.stdout
