"""What a new user meets (issue 25): a run that did not fix anything never reads as done, the
model's commands run with the project's Python, the short ways in (``rune "TASK"``), and a
server that wants a key says how to give one. The real ``rune`` in a subprocess, with the
scripted backend or a fake OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import call, closed_port, final, journals, rune, session_of
from tests.fakes.openai_server import FakeOpenAIServer, error_reply, text_reply
from tests.fakes.terminal import Terminal

from rune.assists.reask import MAX_REASKS
from rune.cli import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK, EXIT_PENDING, EXIT_USAGE

BROKEN = "def add(a, b):\n    return a - b\n"
#: the project's test: it says what add(2, 3) gives, and exits 1 unless that is 5
TEST = (
    "import sys\nfrom calc import add\nprint('add(2, 3) ==', add(2, 3))\nsys.exit(add(2, 3) != 5)\n"
)
FIX = call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")
RUN_TESTS = call("run_command", command="python3 test_calc.py")


@pytest.fixture(autouse=True)
def _no_auto_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    # These runs are about the model's own commands: Rune does not run test_calc.py itself
    # (tests/test_test_driven.py covers that).
    monkeypatch.setenv("RUNE_AUTO_TESTS", "false")


@pytest.fixture
def workspace(home: Path) -> Path:
    path = home / "work"
    path.mkdir()
    (path / "calc.py").write_text(BROKEN, encoding="utf-8")
    (path / "test_calc.py").write_text(TEST, encoding="utf-8")
    return path


def run(
    home: Path,
    workspace: Path,
    script: list[dict[str, Any]],
    *args: str,
    stdin: str = "",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return rune(
        home,
        "run",
        "--backend",
        "scripted",
        "--workspace",
        str(workspace),
        "fix add()",
        *args,
        script=script,
        stdin=stdin,
        env=env,
    )


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout.strip().splitlines()[-1]


# --- outcomes that cannot be fooled -------------------------------------------------------------


#: the fix is rejected, the test command is approved and fails, the model says it is fixed
#: (twice: the first answer right after a failure is sent back once)
REJECTED_THEN_FAILED = [FIX, RUN_TESTS, final("Fixed; the tests pass."), final("Fixed.")]
#: a wrong fix applied, its test command failing, the model saying it is fixed (twice)
WRONG = call("edit_file", path="calc.py", old_text="a - b", new_text="a * b")
APPLIED_THEN_FAILED = [WRONG, RUN_TESTS, final("Fixed."), final("Fixed.")]


def test_a_rejected_fix_then_a_failing_test_command_is_not_done(
    home: Path, workspace: Path
) -> None:
    done = run(home, workspace, REJECTED_THEN_FAILED, stdin="r not like this\na\n")
    assert done.returncode == EXIT_INCOMPLETE, done.stdout + done.stderr
    assert "✓ done" not in done.stdout
    session = session_of(done)
    assert last_line(done).startswith(
        "! answered, but not finished: the last change was rejected (not like this); "
        "the last test command exited 1 (step 4/8); "
    )
    assert last_line(done).endswith(
        f"`rune resume {session} --continue` goes on with a fresh budget"
    )
    # The command's own line says it failed, with its output.
    assert "✗ run_command failed: " in done.stdout and "exit code 1" in done.stdout
    assert "add(2, 3) == -1" in done.stdout
    assert (workspace / "calc.py").read_text() == BROKEN
    assert "incomplete" in rune(home, "sessions").stdout


def test_a_run_that_did_not_finish_says_which_changes_it_leaves_and_how_to_undo_them(
    home: Path, workspace: Path
) -> None:
    failing = run(home, workspace, APPLIED_THEN_FAILED, "-yy")
    assert failing.returncode == EXIT_INCOMPLETE, failing.stdout + failing.stderr
    session = session_of(failing)
    kept, verdict = failing.stdout.strip().splitlines()[-2:]
    undo = f"rune undo {session} --all --workspace {workspace}"
    assert kept == f"the session's file changes stay in place (calc.py): `{undo}` takes them back"
    assert verdict.startswith("! answered, but not finished: the last test command exited 1")
    # the command it names takes the change back
    taken = rune(home, *undo.split()[1:])
    assert taken.returncode == EXIT_OK, taken.stdout + taken.stderr
    assert (workspace / "calc.py").read_text() == BROKEN
    # a run that changed nothing, and one that is done, say nothing of the kind
    rejected = run(home, workspace, REJECTED_THEN_FAILED, stdin="r not like this\na\n")
    fixed = run(home, workspace, [FIX, RUN_TESTS, final("Fixed.")], "-yy")
    assert fixed.returncode == EXIT_OK, fixed.stdout + fixed.stderr
    for done in (rejected, fixed):
        assert "stay in place" not in done.stdout, done.stdout


def test_a_fix_applied_but_its_test_failing_is_not_done_and_passing_again_is(
    home: Path, workspace: Path
) -> None:
    failing = run(home, workspace, APPLIED_THEN_FAILED, "-yy")
    assert failing.returncode == EXIT_INCOMPLETE, failing.stdout + failing.stderr
    assert "not finished: the last test command exited 1 (step 4/8)" in last_line(failing)
    # The model was told once, with the command's output, before its answer was taken.
    assert "Your last command failed: add(2, 3) == 6" in journals()

    # Another command passing proves nothing about the test that failed ...
    (workspace / "calc.py").write_text(BROKEN, encoding="utf-8")
    true = call("run_command", command="true")
    fooled = run(home, workspace, [WRONG, RUN_TESTS, true, final("Ok."), final("Ok.")], "-yy")
    assert fooled.returncode == EXIT_INCOMPLETE, fooled.stdout + fooled.stderr
    assert "the last test command exited 1" in last_line(fooled)

    # ... a change after it, with the same test passing, does.
    (workspace / "calc.py").write_text(BROKEN, encoding="utf-8")
    mend = call("edit_file", path="calc.py", old_text="a * b", new_text="a + b")
    fixed = run(home, workspace, [WRONG, RUN_TESTS, mend, RUN_TESTS, final("Fixed.")], "-yy")
    assert fixed.returncode == EXIT_OK, fixed.stdout + fixed.stderr
    assert last_line(fixed) == "✓ done (step 5/8)"


def test_an_answer_that_changed_nothing_says_so(home: Path, workspace: Path) -> None:
    # "fix add()" asks for a change: the first answer goes back once (rune.assists.unchanged)
    script = [call("read_file", path="calc.py"), final("add() is fine."), final("It is fine.")]
    done = run(home, workspace, script)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert last_line(done) == "✓ answered, no file changed (step 3/8)"


def test_continue_after_an_unfinished_answer_runs_on_with_a_fresh_budget(
    home: Path, workspace: Path
) -> None:
    stopped = run(home, workspace, REJECTED_THEN_FAILED, stdin="r not like this\na\n")
    assert stopped.returncode == EXIT_INCOMPLETE
    session = session_of(stopped)

    plain = rune(home, "resume", session, "--backend", "scripted")
    assert plain.returncode == EXIT_OK
    assert f"rune resume {session} --continue" in plain.stdout

    # A resumed scripted session skips the turns it already had: the script goes on from them.
    going = rune(
        home,
        "resume",
        session,
        "--continue",
        "--backend",
        "scripted",
        "--yes",
        script=[*REJECTED_THEN_FAILED, FIX, final("Fixed now.")],
    )
    assert going.returncode == EXIT_OK, going.stdout + going.stderr
    assert "── step 1/8 ──" in going.stdout  # a new run, with its own budget
    assert last_line(going) == "✓ done (step 2/8)"
    assert (workspace / "calc.py").read_text() == BROKEN.replace("a - b", "a + b")
    # The model was told why the task was not finished.
    assert "The task is not finished: the last change was rejected (not like this)" in journals()
    assert " done " in rune(home, "sessions").stdout


def test_a_turn_that_ran_on_a_fresh_budget_ends_as_the_whole_turn_went(
    home: Path, workspace: Path
) -> None:
    """The change and the failing test command were in the first budget; the second budget
    only answers. The turn changed a file and its last test command failed, whatever the
    second budget did: never "✓ answered, no file changed", nor done."""
    script = [WRONG, RUN_TESTS, *[final("Fixed.")] * 4]
    done = run(home, workspace, script, "-yy", "--max-iterations", "2")
    assert "budget 2/3" in done.stdout, done.stdout
    assert done.returncode == EXIT_INCOMPLETE, done.stdout + done.stderr
    verdict = last_line(done)
    assert verdict.startswith("! answered, but not finished: the last test command exited 1")
    assert "no file changed" not in done.stdout


# --- the project's interpreter -------------------------------------------------------------------


PRINT_PREFIX = call("run_command", command="python3 -c 'import sys; print(sys.prefix)'")


def python3_prefix(home: Path, workspace: Path) -> str:
    """What ``sys.prefix`` the model's ``python3`` has, run by Rune started from a shell that
    activated Rune's own virtual environment."""
    own_bin = str(Path(sys.executable).parent)
    activated = {"PATH": own_bin + os.pathsep + os.environ["PATH"], "VIRTUAL_ENV": sys.prefix}
    done = run(home, workspace, [PRINT_PREFIX, final("That one.")], "-yy", env=activated)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    lines = [ln.strip() for ln in done.stdout.splitlines()]
    index = next(i for i, ln in enumerate(lines) if ln.startswith("✓ run_command done"))
    return lines[index + 1].removeprefix("│").strip()


def test_a_models_python3_is_the_projects_venv(home: Path, workspace: Path) -> None:
    venv = workspace / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    assert python3_prefix(home, workspace) == str(venv)


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="Rune runs from no venv of its own")
def test_without_a_project_venv_a_models_python3_is_not_runes(home: Path, workspace: Path) -> None:
    assert python3_prefix(home, workspace) != sys.prefix


# --- one obvious way in --------------------------------------------------------------------------


@pytest.mark.parametrize(("word", "command"), [("sesions", "sessions"), ("doctr", "doctor")])
def test_a_near_miss_of_a_command_is_a_helpful_error_not_a_task(
    home: Path, word: str, command: str
) -> None:
    done = rune(home, word, "--backend", "scripted", script=[final("no")])
    assert done.returncode == EXIT_USAGE
    assert f"unknown command {word!r}" in done.stderr
    assert f"Did you mean `rune {command}`?" in done.stderr
    assert rune(home, "sessions").stdout.strip() == "no sessions yet"


@pytest.mark.parametrize("task", ["look at calc.py", "fix", "refactor", "docs"])
def test_a_task_in_quotes_or_one_word_is_rune_run(home: Path, workspace: Path, task: str) -> None:
    done = rune(
        home,
        task,
        "--backend",
        "scripted",
        "--workspace",
        str(workspace),
        # twice: a task that asks for a change gets a first answer that changed nothing back,
        # and the same answer word for word again would not be taken as done
        script=[final("add() subtracts."), final("add() subtracts; nothing to change.")],
    )
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert "add() subtracts." in done.stdout
    assert re.fullmatch(r"✓ answered, no file changed \(step [12]/8\)", last_line(done))
    assert task in rune(home, "sessions").stdout


@pytest.mark.parametrize("args", [("run", ""), ("run", "  \n"), ("",), ("tui", " ")])
def test_an_empty_task_is_a_usage_error_not_a_run(
    home: Path, workspace: Path, args: tuple[str, ...]
) -> None:
    done = rune(home, *args, "--backend", "scripted", "--workspace", str(workspace), "--yes")
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert "the task is empty: say what to do, in plain words" in done.stderr
    assert rune(home, "sessions").stdout.strip() == "no sessions yet"


@pytest.mark.parametrize(
    ("script", "hint"),
    [
        ([FIX], "or pass --yes to approve file edits"),
        ([RUN_TESTS], "or pass --yes --yes to approve commands and other tools too"),
    ],
)
def test_an_approval_left_waiting_says_which_yes_would_answer_it(
    home: Path, workspace: Path, script: list[dict[str, Any]], hint: str
) -> None:
    # stdin is an empty pipe: nobody can answer; under --yes the command still asks
    done = run(home, workspace, script, *(("--yes",) if script == [RUN_TESTS] else ()))
    assert done.returncode == EXIT_PENDING, done.stdout + done.stderr
    assert done.stderr.strip().endswith(f"`rune resume {session_of(done)}`; {hint}."), done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("resume", "20990101-000000-abcdef"),
        ("run", "--session", "nope", "go on"),
        ("sessions", "show", "nope"),
        ("undo", "nope"),
        ("redo", "20990101-000000-abcdef"),
    ],
)
def test_a_session_id_that_names_no_session_is_a_usage_error(
    home: Path, args: tuple[str, ...]
) -> None:
    done = (
        rune(home, *args, "--backend", "scripted")
        if args[0] in ("resume", "run")
        else rune(home, *args)
    )
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert done.stderr.startswith("SessionNotFound: "), done.stderr
    assert done.stderr.strip().endswith("`rune sessions` lists them")
    assert "resume" not in done.stdout  # nothing is kept, so nothing says to resume it


def test_unreachable_server_on_resume_keeps_the_session_and_says_how_to_go_on(
    home: Path, workspace: Path
) -> None:
    first = run(home, workspace, [final("nothing here"), final("Nothing to change here.")])
    assert first.returncode == 0, first.stdout + first.stderr
    session = session_of(first)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    done = rune(home, "resume", session, "--backend", url, "--continue")
    assert done.returncode == 1
    last, then = done.stdout.strip().splitlines()[-2:]
    assert last.startswith("✗ ServerUnreachable: no OpenAI-compatible server at ")
    assert then == (
        f"the session is kept: `rune resume {session}` tries again from the last good point"
    )
    assert session in rune(home, "sessions").stdout


def test_rune_alone_without_a_terminal_shows_the_help(home: Path) -> None:
    done = rune(home)
    assert done.returncode == EXIT_USAGE
    assert 'rune "TASK"' in done.stdout and "full-screen interface" in done.stdout


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def test_a_401_says_how_to_give_a_key(
    home: Path, workspace: Path, server: FakeOpenAIServer
) -> None:
    server.script(error_reply(401, "Invalid API key", "authentication_error"))
    url = server.base_url + "/v1"
    done = rune(home, "run", "--backend", url, "--workspace", str(workspace), "hi")
    assert done.returncode == EXIT_FAILED
    said = done.stdout + done.stderr
    assert "HTTP 401: Invalid API key" in said
    for way in ("--api-key KEY", "RUNE_API_KEY", 'api_key = "KEY"'):
        assert way in said

    server.script(error_reply(403, "Forbidden", "authentication_error"), text_reply("hello"))
    refused = rune(
        home, "run", "--backend", url, "--api-key", "k-1", "--workspace", str(workspace), "hi"
    )
    assert refused.returncode == EXIT_FAILED
    assert "refused the API key" in refused.stdout + refused.stderr
    assert server.requests[-1].headers.get("Authorization") == "Bearer k-1"

    keyed = rune(
        home,
        "run",
        "--backend",
        url,
        "--workspace",
        str(workspace),
        "hi",
        env={"RUNE_API_KEY": "k-2"},
    )
    assert keyed.returncode == EXIT_OK, keyed.stdout + keyed.stderr
    assert server.requests[-1].headers.get("Authorization") == "Bearer k-2"


def test_a_reply_cut_off_at_the_output_cap_is_never_the_answer(
    home: Path, workspace: Path, server: FakeOpenAIServer
) -> None:
    # asked again twice (rune.assists.reask), cut off each time
    cut = text_reply("The fix is to ", finish_reason="length")
    server.script(*[cut] * (MAX_REASKS + 1))
    url = server.base_url + "/v1"
    done = rune(home, "run", "--backend", url, "--workspace", str(workspace), "explain")
    assert done.returncode == EXIT_INCOMPLETE, done.stdout + done.stderr
    assert "not finished: the answer was cut off at the output token limit" in last_line(done)
    assert len(server.chat_bodies) == MAX_REASKS + 1


def test_rune_alone_on_a_terminal_opens_the_interface_in_this_directory(
    home: Path, workspace: Path
) -> None:
    environment = {**os.environ, "HOME": str(home), "TERM": "xterm-256color"}
    environment["RUNE_BACKEND"] = "scripted"
    term = Terminal([sys.executable, "-m", "rune.cli"], env=environment, cwd=workspace)
    try:
        term.expect("scripted-demo")
        time.sleep(1)
        term.send("\x11")  # Ctrl-Q
        assert term.wait() == EXIT_OK
    finally:
        term.close()
    listed = rune(home, "sessions").stdout
    assert str(workspace) in listed


# --- what the run goes without is said before it starts ----------------------------------------


def test_tests_rune_cannot_run_here_are_named_before_the_first_turn(
    home: Path, workspace: Path, tmp_path: Path
) -> None:
    # No bubblewrap on PATH: run_tests is not offered, and the run would otherwise end on the
    # model's word without a hint that the project's tests never ran.
    no_tools = tmp_path / "empty-bin"
    no_tools.mkdir()
    done = run(
        home,
        workspace,
        [final("Done.")],
        env={"RUNE_AUTO_TESTS": "true", "PATH": str(no_tools)},
    )
    assert "warning: the workspace has tests, but Rune cannot run them contained here" in (
        done.stderr
    )
    assert "bubblewrap (bwrap) is not installed" in done.stderr


@pytest.mark.bwrap
def test_tests_rune_runs_bring_no_warning(home: Path, workspace: Path) -> None:
    done = run(home, workspace, [final("Done.")], env={"RUNE_AUTO_TESTS": "true"})
    assert "cannot run them" not in done.stderr


def test_a_workspace_without_tests_brings_no_warning(
    home: Path, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "test_calc.py").rename(workspace / "check_calc.py")
    no_tools = tmp_path / "empty-bin"
    no_tools.mkdir()
    done = run(
        home, workspace, [final("Done.")], env={"RUNE_AUTO_TESTS": "true", "PATH": str(no_tools)}
    )
    assert "cannot run them" not in done.stderr and "warning" not in done.stderr


@pytest.mark.bwrap
def test_a_read_only_workspace_is_named_by_doctor_and_before_the_first_turn(
    home: Path, workspace: Path, tmp_path: Path
) -> None:
    """Every change the model makes would fail with "Read-only file system", turn after turn:
    the user hears why before the first one. The workspace is mounted read-only for real
    (bubblewrap), with the rest of the system as it is."""
    from rune.tools.commands import find_bwrap

    bwrap = find_bwrap()
    assert bwrap is not None
    script = tmp_path / "script.json"
    script.write_text(json.dumps([final("Done.")]))
    env = {**os.environ, "HOME": str(home), "NO_COLOR": "1", "RUNE_SCRIPT": str(script)}
    inside = [bwrap, "--dev-bind", "/", "/", "--ro-bind", str(workspace), str(workspace), "--"]
    rune_argv = [*inside, sys.executable, "-m", "rune.cli"]
    where = ("--backend", "scripted", "--workspace", str(workspace))
    said = f"the workspace {workspace} is on a read-only file system: Rune can read it"

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*rune_argv, *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )

    doctor = call("doctor", *where)
    assert f"!!  workspace: {said}" in doctor.stdout, doctor.stdout + doctor.stderr
    assert doctor.returncode == EXIT_FAILED
    done = call("run", *where, "look at calc.py")
    assert f"warning: {said}" in done.stderr, done.stdout + done.stderr
    # writable, nothing is said
    assert "read-only" not in rune(home, "doctor", *where).stdout


@pytest.mark.bwrap
def test_a_failed_check_says_the_exception_it_ended_on(home: Path, workspace: Path) -> None:
    check = call(
        "run_python", code="from calc import add\nassert add(2, 3) == 5, 'add(2, 3) is wrong'"
    )
    done = run(home, workspace, [check, final("It is wrong."), final("It is wrong.")], "-yy")
    line = next(ln for ln in done.stdout.splitlines() if "run_python failed" in ln)
    assert line.strip().endswith(
        "✗ run_python failed: exit code 1: AssertionError: add(2, 3) is wrong"
    ), done.stdout
