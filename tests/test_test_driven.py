"""Tests drive the loop (issue 22): where the workspace has tests, Rune runs the ones the task
names itself, contained and read-only, before the first model call and after each change, and
a run whose failing tests pass after a change ends there without another model turn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import rune
from tests.fakes.ollama_server import FakeModel, FakeOllama, text_reply, tool_call, tool_reply

from rune.assists.repair import FIRST_SEED, SAMPLES
from rune.assists.tests import UNMOVED_NOTE
from rune.cli import EXIT_OK
from rune.errors import ToolError
from rune.events import BudgetRenewed
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.commands import bwrap_works, find_bwrap
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.testing import (
    auto_check,
    find_test_files,
    first_failure,
    is_test_path,
    named_tests,
    plan_tests,
    shown_functions,
    tally,
)
from rune.transport.scripted import ScriptedTransport

BWRAP = find_bwrap()
needs_bwrap = pytest.mark.skipif(
    BWRAP is None or not bwrap_works(BWRAP), reason="bubblewrap cannot build a sandbox here"
)

BROKEN = "def add(a, b):\n    total = a - b\n    return total\n"
FIXED = "def add(a, b):\n    total = a + b\n    return total\n"
WRONG = "def add(a, b):\n    total = a * b\n    return total\n"
# unittest style, so it runs under pytest and, where an interpreter has no pytest, unittest
TEST_CALC = """\
import unittest

from calc.ops import add


class TestAdd(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
"""
TASK = (
    "The test tests/test_calc.py::TestAdd::test_add fails. Find the bug in the library code "
    "(the tests are right) and fix it."
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return calc_project(tmp_path / "ws")


def calc_project(path: Path) -> Path:
    """A package ``calc`` with the bug in ``calc/ops.py`` and its tests in ``tests/``."""
    (path / "calc").mkdir(parents=True)
    (path / "calc" / "__init__.py").write_text("")
    (path / "calc" / "ops.py").write_text(BROKEN)
    (path / "tests").mkdir()
    (path / "tests" / "__init__.py").write_text("")
    (path / "tests" / "test_calc.py").write_text(TEST_CALC)
    return path


def executor(ws: Path) -> ToolExecutor:
    """As ``rune`` runs: home (here the test's directory) is readable, the workspace writable."""
    return ToolExecutor(SandboxPolicy.default(home=ws.parent), ws)


def runtime(
    ws: Path, transport: ScriptedTransport, protocol: str = "constrained"
) -> LocalToolRuntime:
    tools = executor(ws)
    return LocalToolRuntime(
        transport,
        tools,
        model="m",
        protocol=protocol,
        auto_checks=lambda request: auto_check(request, tools.workspace, tools.policy),
    )


def turn(**fields: Any) -> dict[str, Any]:
    return {"content": json.dumps(fields)}


def change(code: str, path: str = "calc/ops.py") -> dict[str, Any]:
    return turn(tool="replace_function", arguments={"path": path, "name": "add", "code": code})


def approve_all(loop: LocalToolRuntime, resp: Any) -> Any:
    while resp.pending is not None:
        resp = loop.approve(resp.pending_state)
    return resp


# --- finding the tests ------------------------------------------------------------------------


def test_test_files_are_told_by_name_and_directory() -> None:
    assert is_test_path("tests/test_calc.py")
    assert is_test_path("pkg/tests/helpers.py")
    assert is_test_path("calc_test.py")
    assert is_test_path("conftest.py")
    assert not is_test_path("calc/ops.py")
    assert not is_test_path("testing_notes.md")
    assert not is_test_path("contest.py")


def test_a_named_test_is_found_where_it_is(ws: Path) -> None:
    (ws / "pkg" / "tests").mkdir(parents=True)
    (ws / "pkg" / "tests" / "test_mod.py").write_text("")
    (ws / "other").mkdir()
    (ws / "other" / "test_calc.py").write_text("")
    files = find_test_files(ws, SandboxPolicy.default(home=ws.parent))
    assert sorted(files) == ["other/test_calc.py", "pkg/tests/test_mod.py", "tests/test_calc.py"]
    # as given; by a name that exists once in the tree (the user named it from its folder)
    named = named_tests("test_mod.py::test_x and tests/test_calc.py::TestAdd fail", ws, files)
    assert named == ["pkg/tests/test_mod.py::test_x", "tests/test_calc.py::TestAdd"]
    # a name that exists twice is not guessed; a path that does not exist is not made up
    assert named_tests("test_calc.py fails", ws, files) == []
    assert named_tests("tests/test_nothing.py fails", ws, files) == []


PARAMETRISED = """\
import pytest


@pytest.mark.parametrize(("word", "title"), [("active_record", "Active Record"), ("x", "X")])
def test_titleize(word, title):
    assert word.replace("_", " ").title() == title
"""


@needs_bwrap
def test_a_parametrised_id_with_a_space_is_one_test(ws: Path) -> None:
    """pytest ids hold spaces in their brackets; split at the space, the test was "not found"."""
    (ws / "tests" / "test_words.py").write_text(PARAMETRISED)
    files = find_test_files(ws, SandboxPolicy.default(home=ws.parent))
    wanted = "tests/test_words.py::test_titleize[active_record-Active Record]"
    request = f"The test {wanted} fails with: AssertionError. Fix it."
    assert named_tests(request, ws, files) == [wanted]
    venv_python = Path(sys.executable)
    if subprocess.run([venv_python, "-c", "import pytest"], check=False).returncode != 0:
        pytest.skip("this interpreter has no pytest")
    (ws / ".venv").symlink_to(venv_python.parent.parent)
    passed = executor(ws).run("run_tests", {"tests": wanted})
    assert passed.startswith("the tests pass: 1 passed")
    assert "all of tests/test_words.py: 2 passed" in passed


def test_a_workspace_without_tests_has_no_auto_check(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(BROKEN)
    policy = SandboxPolicy.default(home=tmp_path)
    assert plan_tests("fix add", tmp_path, policy) is None
    assert "run_tests" not in {spec.name for spec in ToolExecutor(policy, tmp_path).specs()}


def test_the_tests_are_right_protects_test_files(ws: Path) -> None:
    policy = SandboxPolicy.default(home=ws.parent)
    plan = plan_tests(TASK, ws, policy)
    assert plan is not None and plan.tests == ("tests/test_calc.py::TestAdd::test_add",)
    assert plan.refusal(ws, {"path": "tests/test_calc.py"}) is not None
    assert plan.refusal(ws, {"path": str(ws / "tests" / "test_calc.py")}) is not None
    assert plan.refusal(ws, {"path": "calc/ops.py"}) is None
    unprotected = plan_tests("make tests/test_calc.py pass", ws, policy)
    assert unprotected is not None and unprotected.refusal(ws, {"path": "tests/x.py"}) is None


#: commands that could change a test the task says is right: refused
TOUCHING_TESTS = [
    "rm tests/test_calc.py",
    "rm -rf tests",
    "rm -rf .",
    "rm -rf *",
    "git checkout -- tests",
    "sed -i s/5/6/ tests/test_calc.py",
    "cat /dev/null > tests/test_calc.py",
    "python -m pytest tests/test_calc.py; rm tests/test_calc.py",
    "python3 -c \"import os; os.remove('tests/test_calc.py')\"",
    "find . -name 'test_*' -delete",
    "mv tests/test_calc.py /tmp/x",
    "cp calc/ops.py tests/test_calc.py",
    "rm tests/test_calc.py 'unclosed",
    "rm -rf ..",
    "rm -rf ../*",
    "rm -rf /",
    "rm -rf tests/*.py",
    "rm -rf calc/../tests",
]
#: commands that run or read the tests, or reach none of them: left to approval
LEAVING_TESTS = [
    "python -m pytest -q tests/test_calc.py",
    "python3 -m unittest tests.test_calc",
    "pytest tests",
    "python3 tests/test_calc.py",
    "cat tests/test_calc.py",
    "grep -n add tests/test_calc.py",
    "ls -la .",
    "rm -rf build",
    "sed -i s/a-b/a+b/ calc/ops.py",
    "git status",
    "rm -rf /nonexistent-rune-dir/*",
    "rm -rf calc/*.pyc",
]


@pytest.mark.parametrize("command", TOUCHING_TESTS)
def test_the_tests_are_right_refuses_a_command_that_could_change_them(
    ws: Path, command: str
) -> None:
    plan = plan_tests(TASK, ws, SandboxPolicy.default(home=ws.parent))
    assert plan is not None
    refusal = plan.refusal(ws, {"command": command})
    assert refusal is not None and "the task says the tests are right" in refusal


@pytest.mark.parametrize("command", LEAVING_TESTS)
def test_a_command_that_runs_reads_or_misses_the_tests_is_left_to_approval(
    ws: Path, command: str
) -> None:
    plan = plan_tests(TASK, ws, SandboxPolicy.default(home=ws.parent))
    assert plan is not None and plan.refusal(ws, {"command": command}) is None
    unprotected = plan_tests("make tests/test_calc.py pass", ws, SandboxPolicy.default())
    assert unprotected is not None and unprotected.refusal(ws, {"command": "rm -rf tests"}) is None


# --- the tool ---------------------------------------------------------------------------------


@needs_bwrap
def test_a_failing_test_is_shown_with_its_error_and_the_code_it_runs(ws: Path) -> None:
    with pytest.raises(ToolError) as caught:
        executor(ws).run("run_tests", {"tests": "tests/test_calc.py"})
    digest = str(caught.value)
    assert digest.startswith("the tests failed")
    assert "test_add" in digest and "-1 != 5" in digest
    # the traceback never leaves the test: the function its failing line calls is shown
    assert "calc/ops.py:" in digest and "total = a - b" in digest
    # and the test itself, with the values it asserts
    assert "The test:\ntests/test_calc.py:" in digest
    assert "self.assertEqual(add(2, 3), 5)" in digest
    assert "test_zero" not in digest.split("Also failing")[0].replace("test_add", "")


@needs_bwrap
def test_a_source_two_failures_run_is_shown_once(ws: Path) -> None:
    """A spec task's stub: every test fails in the same function; shown once per failure, the
    stub stood three times in the 1.5B's first prompt."""
    (ws / "calc" / "ops.py").write_text("def add(a, b):\n    raise NotImplementedError\n")
    with pytest.raises(ToolError) as caught:
        executor(ws).run("run_tests", {"tests": "tests/test_calc.py"})
    digest = str(caught.value)
    assert digest.count("\nFAILED ") == 2
    assert digest.count("raise NotImplementedError") == 1
    assert digest.count("Source of the code it runs: shown above.") == 1


#: four failing tests under unittest, one with two failing subtests
TEST_MANY = """\
import unittest

from calc.ops import add


class TestAdd(unittest.TestCase):
    def test_a(self):
        self.assertEqual(add(1, 1), 2)

    def test_b(self):
        self.assertEqual(add(1, 2), 3)

    def test_c(self):
        for n in (1, 2):
            with self.subTest(n=n):
                self.assertEqual(add(n, 0), n)

    def test_d(self):
        self.assertEqual(add(2, 2), 4)
"""


@needs_bwrap
@pytest.mark.parametrize("runner", ["unittest", "pytest"])
def test_the_failures_not_shown_are_named_as_ids_run_tests_takes(ws: Path, runner: str) -> None:
    """unittest's report names its failing tests only in their headers; pytest's short summary
    by node id. Either way the digest names the ones it does not show, each once, as an id
    ``run_tests`` takes (a spec stub fails them all: the model was told of two)."""
    (ws / "calc" / "ops.py").write_text("def add(a, b):\n    raise NotImplementedError\n")
    (ws / "tests" / "test_calc.py").write_text(TEST_MANY)
    if runner == "pytest":  # a project that configures pytest, in a venv that has it
        venv_python = Path(sys.executable)
        if subprocess.run([venv_python, "-c", "import pytest"], check=False).returncode != 0:
            pytest.skip("this interpreter has no pytest")
        (ws / ".venv").symlink_to(venv_python.parent.parent)
        (ws / "pytest.ini").write_text("[pytest]\n")
    with pytest.raises(ToolError) as caught:
        executor(ws).run("run_tests", {"tests": "tests/test_calc.py"})
    digest = str(caught.value)
    also = digest.split("Also failing: ", 1)[1].splitlines()[0].split(", ")
    assert also == ["tests/test_calc.py::TestAdd::test_c", "tests/test_calc.py::TestAdd::test_d"]
    assert "(failures=" not in digest.split("\n", 1)[1]
    with pytest.raises(ToolError) as again:
        executor(ws).run("run_tests", {"tests": also[1]})
    assert "test_d" in str(again.value) and tally(str(again.value)) == (1, 1)
    assert ("Ran 1 test" in str(again.value)) == (runner == "unittest")


SEQS = "def tail(n, seq):\n    return seq[n:]\n\n\ndef last(seq):\n    return tail(1, seq)[0]\n"
TEST_SEQS = """\
import unittest

from calc.seqs import last


class TestLast(unittest.TestCase):
    def test_last(self):
        self.assertEqual(last("ABCDE"), "E")
"""


@needs_bwrap
def test_the_functions_a_shown_function_calls_are_shown_beside_it(ws: Path) -> None:
    """toolz: test_last fails for a bug in the tail() that last() calls; shown last() alone,
    the 1.5B rewrote last()."""
    (ws / "calc" / "seqs.py").write_text(SEQS)
    (ws / "tests" / "test_seqs.py").write_text(TEST_SEQS)
    with pytest.raises(ToolError) as caught:
        executor(ws).run("run_tests", {"tests": "tests/test_seqs.py"})
    digest = str(caught.value)
    assert "return tail(1, seq)[0]" in digest
    assert "calc/seqs.py (last calls it):" in digest and "return seq[n:]" in digest


def package_test_digest(ws: Path, test_source: str) -> str:
    """The digest of a failing run of ``test_source``, which reaches ``SEQS`` through the
    package ``calc`` (``from .seqs import *``, as more-itertools and toolz export)."""
    (ws / "calc" / "seqs.py").write_text(SEQS)
    (ws / "calc" / "__init__.py").write_text("from .seqs import *  # noqa\n")
    (ws / "tests" / "test_seqs.py").write_text(test_source)
    with pytest.raises(ToolError) as caught:
        executor(ws).run("run_tests", {"tests": "tests/test_seqs.py"})
    return str(caught.value)


TEST_SEQS_BY_PACKAGE = """\
import unittest

import calc


class TestLast(unittest.TestCase):
    def test_last(self):
        actual = calc.last("ABCDE")
        self.assertEqual(actual, "E")
"""


@needs_bwrap
def test_a_function_a_package_takes_from_its_modules_is_shown_from_where_it_is(ws: Path) -> None:
    """more-itertools: the test calls ``mi.tail`` (``from .recipes import *`` in the package),
    then fails on ``self.assertEqual(actual, expected)``: no source was shown, and the 1.5B
    made up a module of its own."""
    digest = package_test_digest(ws, TEST_SEQS_BY_PACKAGE)
    assert "calc/seqs.py:\n" in digest and "return tail(1, seq)[0]" in digest
    assert shown_functions(digest) == [("calc/seqs.py", "last"), ("calc/seqs.py", "tail")]


TEST_SEQS_OVER_LINES = """\
import unittest

import calc as c


class TestLast(unittest.TestCase):
    def test_last(self):
        for seq, expected in [("AB", "B"), ("ABCDE", "E")]:
            self.assertEqual(
                c.last(seq), expected
            )
"""


@needs_bwrap
def test_the_call_on_the_next_line_of_a_failing_assert_is_shown(ws: Path) -> None:
    """more-itertools' DistributeTest: the traceback names ``self.assertEqual(``, and the call
    under test stands on the line below it; no source was shown, the 1.5B searched the wrong
    module for ``mi.distribute`` and answered that the test is wrong."""
    digest = package_test_digest(ws, TEST_SEQS_OVER_LINES)
    assert "tests/test_seqs.py:9 in test_last" in digest
    assert shown_functions(digest) == [("calc/seqs.py", "last"), ("calc/seqs.py", "tail")]


def test_the_first_failure_of_a_digest_is_read_back_without_the_source_it_shows() -> None:
    digest = (
        "the tests failed (2 failed in 0.04s)\n\nFAILED test_a\n  AssertionError: 1 != 2\n"
        "The test:\nt.py:\n    3  def test_a():\nSource of the code it runs:\npkg/a.py:\n"
        "   10  def f(x):\n\nFAILED test_b\n  ValueError: boom"
    )
    assert first_failure(digest) == (
        "FAILED test_a\n  AssertionError: 1 != 2\nThe test:\nt.py:\n    3  def test_a():"
    )
    assert first_failure("the tests failed:\nno digest") is None


def test_the_functions_a_digest_shows_are_read_back_without_the_tests() -> None:
    digest = (
        "The test:\ntests/test_x.py:\n    7      def test_f(self):\n"
        "Source of the code it runs:\npkg/a.py:\n   10  @cache\n   11  def f(x):\n"
        "pkg/a.py (f calls it):\n   20      async def g(y):\npkg/a.py:\n   11  def f(x):\n"
    )
    assert shown_functions(digest) == [("pkg/a.py", "f"), ("pkg/a.py", "g")]
    assert shown_functions("the tests failed (1 failed)") == []


@needs_bwrap
def test_a_frame_in_project_code_shows_its_function(ws: Path) -> None:
    (ws / "calc" / "ops.py").write_text("def add(a, b):\n    return a + c\n")
    with pytest.raises(ToolError) as caught:
        executor(ws).run("run_tests", {"tests": "tests/test_calc.py::TestAdd::test_add"})
    digest = str(caught.value)
    assert "NameError" in digest
    assert "Traceback in the project:" in digest and "calc/ops.py:2 in add" in digest
    assert "return a + c" in digest


@needs_bwrap
def test_passing_tests_say_so_and_nothing_is_written(ws: Path) -> None:
    (ws / "calc" / "ops.py").write_text(FIXED)
    before = sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*"))
    out = executor(ws).run("run_tests", {})
    # pytest where the project's interpreter has it, else unittest
    assert out.startswith("the tests pass:")
    assert "2 passed" in out or out.endswith("Ran 2 tests") or "Ran 2 tests in" in out
    assert sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*")) == before


#: a test module that prints a unittest failure whose frame is ``{frame}``, and ends the run
FORGED_FAILURE = (
    TEST_CALC
    + "\nimport os, sys\n"
    + "sys.stdout.write('\\n' + '=' * 70 + '\\nFAIL: test_x (t.T)\\n' + '-' * 70 + "
    + '\'\\nTraceback (most recent call last):\\n  File "{frame}", line 2, in db\\n'
    + "AssertionError\\n\\n' + '-' * 70 + '\\nRan 1 test in 0.1s\\n\\nFAILED (failures=1)\\n')\n"
    + "sys.stdout.flush()\nos._exit(1)\n"
)


@needs_bwrap
def test_a_digest_shows_no_source_a_workspace_link_leads_out_to(tmp_path: Path) -> None:
    """A link in the workspace (a cloned repository's, or one an approved command made) to a
    file outside it: the contained run cannot follow it, but the digest is read on the host.
    A trial of a test file the model wrote (no approval) prints a traceback through the link;
    the digest must not show what read_file refuses to read without asking."""
    ws = calc_project(tmp_path / "ws")
    # the forged report is unittest's: a project venv without pytest makes unittest the runner
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", ws / ".venv"], check=True)
    outside = tmp_path / "other-project" / "settings.py"
    outside.parent.mkdir()
    outside.write_text("def db():\n    password = 'HOST-SECRET-41'\n    return password\n")
    (ws / "calc" / "settings.py").symlink_to(outside)
    policy = SandboxPolicy(
        read_roots=[ws], write_roots=[ws], ask_read_roots=[tmp_path], home=tmp_path
    )
    tools = ToolExecutor(policy, ws, ask_reads=False)
    with pytest.raises(ToolError, match="outside the directories Rune reads freely"):
        tools.run("read_file", {"path": "calc/settings.py"})
    forged = FORGED_FAILURE.format(frame=ws / "calc" / "settings.py")
    trial = tools.try_change(
        "write_file", {"path": "tests/test_calc.py", "content": forged}, "run_tests", {}
    )
    assert trial is not None and "FAILED test_x" in trial.report, trial
    assert "HOST-SECRET" not in trial.report, trial.report


def test_the_digest_reads_only_the_projects_own_source_and_none_too_big(tmp_path: Path) -> None:
    """What the digest (and the docstring examples) read on the host, unasked: a forged frame
    may name a generated module of megabytes (seconds and gigabytes in ast.parse), a hard
    link to a file elsewhere, or a FIFO (a read that never returns)."""
    import os

    from rune.tools.fs import MAX_PARSED_BYTES, read_project_source

    ws = calc_project(tmp_path / "ws")
    assert read_project_source(ws / "calc" / "ops.py", ws) == BROKEN
    big = ws / "calc" / "generated.py"
    big.write_text("def f():\n" + "    x = 1\n" * (MAX_PARSED_BYTES // 10 + 1))
    secret = tmp_path / "secret.py"
    secret.write_text("TOKEN = 'HOST-SECRET-42'\n")
    os.link(secret, ws / "calc" / "linked.py")
    os.mkfifo(ws / "calc" / "pipe.py")
    (ws / "calc" / "out.py").symlink_to(secret)
    for name in ("generated.py", "linked.py", "pipe.py", "out.py"):
        assert read_project_source(ws / "calc" / name, ws) is None, name
    assert read_project_source(secret, ws) is None


@pytest.mark.parametrize("hostile", ["--co", "/etc/passwd", "../outside.py", "a\0b"])
def test_test_ids_that_are_not_workspace_paths_are_refused(ws: Path, hostile: str) -> None:
    from rune.errors import ToolInputError

    with pytest.raises(ToolInputError):
        executor(ws).run("run_tests", {"tests": f"tests/test_calc.py {hostile}"})


# --- the loop ---------------------------------------------------------------------------------


@needs_bwrap
def test_the_model_starts_from_the_failure_and_a_passing_change_ends_the_run(ws: Path) -> None:
    transport = ScriptedTransport([change(FIXED)], tools=True)
    loop = runtime(ws, transport)
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.success and resp.incomplete is None
    assert (ws / "calc" / "ops.py").read_text() == FIXED
    # one model call: the tests ran before it and after the change, no turn spent on either
    assert len(transport.requests) == 1
    first_prompt = transport.requests[0].messages[-1]["content"]
    assert first_prompt.startswith("Rune ran the tests tests/test_calc.py::TestAdd::test_add")
    assert "-1 != 5" in first_prompt
    runs = [(e.source, e.name, e.status) for e in resp.events]
    assert runs == [
        ("rune", "run_tests", "failed"),
        ("constrained", "replace_function", "done"),
        ("rune", "run_tests", "done"),
    ]
    assert resp.text.startswith("Fixed: the tests tests/test_calc.py::TestAdd::test_add")
    assert "calc/ops.py" in resp.text


#: makes the named test (add(2, 3) == 5) pass and its neighbour (add(0, 0) == 0) fail
NAMED_ONLY = "def add(a, b):\n    return 5\n"


@needs_bwrap
def test_a_named_test_that_passes_is_followed_by_its_whole_file(ws: Path) -> None:
    (ws / "calc" / "ops.py").write_text(NAMED_ONLY)
    with pytest.raises(ToolError) as caught:
        executor(ws).run("run_tests", {"tests": "tests/test_calc.py::TestAdd::test_add"})
    report = str(caught.value)
    assert report.startswith(
        "the tests named pass now, but other tests in tests/test_calc.py fail: the tests failed"
    )
    assert "test_zero" in report and "5 != 0" in report
    (ws / "calc" / "ops.py").write_text(FIXED)
    passed = executor(ws).run("run_tests", {"tests": "tests/test_calc.py::TestAdd::test_add"})
    assert passed.startswith("the tests pass: ") and "; all of tests/test_calc.py: " in passed


@needs_bwrap
def test_a_fix_for_the_named_test_alone_does_not_end_the_run(ws: Path) -> None:
    """The 1.5B's fix for one named test broke the next test in its file; Rune said "Fixed"."""
    transport = ScriptedTransport([native(NAMED_ONLY), native(FIXED)], tools=True)
    loop = runtime(ws, transport, protocol="native")
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.success and len(transport.requests) == 2
    told = transport.requests[1].messages[-1]["content"]
    assert "other tests in tests/test_calc.py fail" in told and "test_zero" in told
    assert resp.text.startswith("Fixed: ") and "all of tests/test_calc.py" in resp.text
    assert (ws / "calc" / "ops.py").read_text() == FIXED


@needs_bwrap
def test_the_repair_tries_changes_against_the_whole_file_of_the_named_test(ws: Path) -> None:
    """Constrained: the model's change passes the named test alone, so it is refuted by the
    whole file, and a sample from a fresh start that passes all of it takes its place."""
    transport = ScriptedTransport([change(NAMED_ONLY), change(FIXED)], tools=True)
    loop = runtime(ws, transport)
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.success and resp.text.startswith("Fixed: ")
    applied = [e.arguments["code"] for e in resp.events if e.name == "replace_function"]
    assert applied == [FIXED]
    assert any(
        w.startswith("the model's change failed the project's tests;") for w in resp.warnings
    )


def native(code: str) -> dict[str, Any]:
    arguments = {"path": "calc/ops.py", "name": "add", "code": code}
    return {"tool_calls": [{"function": {"name": "replace_function", "arguments": arguments}}]}


@needs_bwrap
def test_a_change_that_does_not_fix_it_is_answered_with_the_tests(ws: Path) -> None:
    transport = ScriptedTransport([native(WRONG), native(FIXED)], tools=True)
    loop = runtime(ws, transport, protocol="native")
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.success and len(transport.requests) == 2
    second_prompt = transport.requests[1].messages[-1]["content"]
    assert second_prompt.startswith("Rune ran the tests")
    assert "after your change" in second_prompt and "6 != 5" in second_prompt
    assert [e.status for e in resp.events if e.source == "rune"] == ["failed", "failed", "done"]


@needs_bwrap
def test_a_check_of_the_models_passing_does_not_clear_the_failing_tests(ws: Path) -> None:
    # its own assert passes on its wrong change (2 * 3 == 6); the tests still fail with it
    check = {"code": "from calc.ops import add\nassert add(2, 3) == 6"}
    passing_check = {"tool_calls": [{"function": {"name": "run_python", "arguments": check}}]}
    script = [native(WRONG), passing_check, {"content": "Fixed."}, {"content": "Fixed, really."}]
    transport = ScriptedTransport(script, tools=True)
    loop = runtime(ws, transport, protocol="native")
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert [e.status for e in resp.events if e.name == "run_python"] == ["done"]
    assert resp.outcome == "incomplete" and resp.incomplete == "the project's tests fail"
    # the first answer went back once with the failure, as after any failure
    told = str(transport.requests[3].messages[-1]["content"])
    assert "The task is not finished" in told and "6 != 5" in told


@needs_bwrap
def test_changes_that_leave_the_failure_as_it_was_are_told_then_stopped(ws: Path) -> None:
    """The 1.5B added 14, 15, 16, 17 to a tuple that was not the bug, one turn each."""
    unmoved = [
        native(f"def add(a, b):\n    total = a - b  # try {n}\n    return total\n")
        for n in range(1, 5)
    ]
    transport = ScriptedTransport(unmoved, tools=True)
    loop = runtime(ws, transport, protocol="native")
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert len(transport.requests) == 3  # the fourth change is never asked for
    told = [str(r.messages[-1]["content"]) for r in transport.requests]
    assert [UNMOVED_NOTE in t for t in told] == [False, False, True]
    assert resp.text == (
        "Stopped: the last 3 changes left the tests tests/test_calc.py::TestAdd::test_add "
        "failing exactly as before."
    )
    assert resp.incomplete is not None  # the tests still fail: never "done"


@needs_bwrap
def test_a_change_that_moves_the_failure_starts_the_count_again(ws: Path) -> None:
    script = [
        native("def add(a, b):\n    return a - b  # one\n"),
        native("def add(a, b):\n    return a * b\n"),  # 6 != 5: another failure
        native("def add(a, b):\n    return a * b  # two\n"),
        native(FIXED),
    ]
    transport = ScriptedTransport(script, tools=True)
    loop = runtime(ws, transport, protocol="native")
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.text.startswith("Fixed: ") and len(transport.requests) == 4


@needs_bwrap
def test_a_wrong_first_change_is_repaired_against_the_tests(ws: Path) -> None:
    """The tests are the failed check the sampled repair needs: a first change that fails them
    is not offered when a sample from a fresh start (which sees the failure) passes them."""
    transport = ScriptedTransport([change(WRONG), change(FIXED)], tools=True)
    loop = runtime(ws, transport)
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.success and (ws / "calc" / "ops.py").read_text() == FIXED
    sample = transport.requests[1]
    assert sample.options is not None and sample.options.get("seed") == 101
    assert sample.messages[-1]["content"].startswith("Rune ran the tests")
    assert any("failed the project's tests; of 1 other" in w for w in resp.warnings)


#: a change to a test the task says is right, and the reason it is refused with
CHEATS = [
    (
        "write_file",
        {"path": "tests/test_calc.py", "content": "def test_add():\n    pass\n"},
        "the task says the tests are right",
    ),
    # the 1.5B did this under --yes --yes: approval was given before the command was seen
    ("run_command", {"command": "rm tests/test_calc.py"}, "may run or read them, not change"),
]


@needs_bwrap
@pytest.mark.parametrize(("tool", "arguments", "reason"), CHEATS)
def test_a_change_to_a_test_the_task_says_is_right_is_refused(
    ws: Path, tool: str, arguments: dict[str, Any], reason: str
) -> None:
    transport = ScriptedTransport([turn(tool=tool, arguments=arguments), change(FIXED)], tools=True)
    loop = runtime(ws, transport)
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.success
    assert (ws / "tests" / "test_calc.py").read_text() == TEST_CALC
    refused = resp.events[1]
    assert refused.name == tool and refused.status == "failed"
    assert reason in (refused.error or "")


@needs_bwrap
def test_tests_that_pass_at_the_start_do_not_end_the_run(ws: Path) -> None:
    (ws / "calc" / "ops.py").write_text(FIXED)
    improved = FIXED.replace("total = a + b", "total = b + a")
    transport = ScriptedTransport(
        [change(improved), turn(answer="Swapped the operands.")], tools=True
    )
    loop = runtime(ws, transport)
    resp = approve_all(loop, loop.run([{"role": "user", "content": "swap the operands in add"}]))
    assert resp.success and resp.text == "Swapped the operands."
    assert len(transport.requests) == 2


# --- through the command ----------------------------------------------------------------------


@needs_bwrap
def test_rune_run_fixes_a_failing_test_in_one_model_call(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    workspace = home / "proj"
    ws.rename(workspace)
    fixed = tool_call("replace_function", {"path": "calc/ops.py", "name": "add", "code": FIXED})
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        server.script(tool_reply(fixed))
        done = rune(
            home,
            "run",
            "--workspace",
            str(workspace),
            "--yes",
            TASK,
            env={"OLLAMA_HOST": server.url},
        )
        assert server.count("/api/chat") == 1
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert (workspace / "calc" / "ops.py").read_text() == FIXED
    assert "Fixed: the tests" in done.stdout
    assert "run_tests" in done.stdout


# --- no dead loops ----------------------------------------------------------------------------


def read(path: str) -> dict[str, Any]:
    return {"tool_calls": [{"function": {"name": "read_file", "arguments": {"path": path}}}]}


def test_two_failing_calls_taking_turns_stop_the_run(tmp_path: Path) -> None:
    transport = ScriptedTransport(
        [read("a.py"), read("b.py"), read("a.py"), read("b.py"), {"content": "done"}], tools=True
    )
    loop = LocalToolRuntime(
        transport, ToolExecutor(SandboxPolicy.default(home=tmp_path), tmp_path), model="m"
    )
    resp = loop.run([{"role": "user", "content": "read a.py and b.py"}])
    assert not resp.success and resp.error_kind == "CircuitBreaker"
    assert resp.error == (
        "tool read_file failed 2 times with identical arguments, with only failing calls "
        "between — stopping before the iteration budget burns"
    )
    assert len(transport.requests) == 3


def test_a_call_that_works_between_resets_the_count(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("old\n")
    transport = ScriptedTransport(
        [read("a.py"), read("notes.txt"), read("a.py"), {"content": "done"}], tools=True
    )
    loop = LocalToolRuntime(
        transport, ToolExecutor(SandboxPolicy.default(home=tmp_path), tmp_path), model="m"
    )
    resp = loop.run([{"role": "user", "content": "read the notes"}])
    assert resp.success and resp.text == "done"


# --- finding a file by the name the task gave -------------------------------------------------


def test_a_path_that_exists_once_deeper_is_read_with_a_note(ws: Path) -> None:
    out = executor(ws).run("read_file", {"path": "test_calc.py"})
    assert out.startswith("[test_calc.py does not exist; this is tests/test_calc.py, the one")
    assert "from calc.ops import add" in out
    out = executor(ws).run("read_file", {"path": "ops.py"})
    assert "this is calc/ops.py" in out and "total = a - b" in out


def test_a_missing_path_lists_the_near_names(ws: Path) -> None:
    (ws / "lib").mkdir()
    (ws / "lib" / "ops.py").write_text("")
    with pytest.raises(ToolError) as caught:
        executor(ws).run("read_file", {"path": "ops.py"})
    assert "Files with a similar name: calc/ops.py, lib/ops.py." in str(caught.value)
    with pytest.raises(ToolError) as caught:
        executor(ws).run("read_file", {"path": "opps.py"})
    assert "calc/ops.py" in str(caught.value)
    with pytest.raises(ToolError) as caught:
        executor(ws).run("read_file", {"path": "nothing_like_it.txt"})
    assert "similar" not in str(caught.value)


def test_a_change_to_a_missing_path_names_the_file_it_may_mean(ws: Path) -> None:
    with pytest.raises(ToolError) as caught:
        executor(ws).prepare("replace_function", {"path": "ops.py", "name": "add", "code": FIXED})
    assert "the one file whose path ends so is calc/ops.py: use that path" in str(caught.value)
    assert not (ws / "ops.py").exists()


# --- longer tasks -----------------------------------------------------------------------------


def operator(tmp_path: Path, turns: list[dict[str, Any]], budgets: int) -> Any:
    from rune.operator import RuneOperator

    events: list[Any] = []
    tools = ToolExecutor(SandboxPolicy.default(home=tmp_path), tmp_path)
    op = RuneOperator(
        ScriptedTransport(turns, tools=True),
        tools,
        model="m",
        max_iterations=2,
        max_budgets=budgets,
        on_event=events.append,
    )
    return op, events


def write(n: int) -> dict[str, Any]:
    arguments = {"path": f"step{n}.txt", "content": f"{n}\n"}
    return {"tool_calls": [{"function": {"name": "write_file", "arguments": arguments}}]}


def drive(op: Any, text: str) -> Any:
    resp = op.send(text)
    while resp.pending is not None:
        resp = op.approve()
    return resp


def test_a_budget_that_made_a_change_is_followed_by_another(tmp_path: Path) -> None:
    turns = [write(1), write(2), write(3), {"content": "All three written."}]
    op, events = operator(tmp_path, turns, budgets=3)
    resp = drive(op, "write three files")
    assert resp.success and resp.text == "All three written."
    assert [e for e in events if isinstance(e, BudgetRenewed)] == [BudgetRenewed(2, 3)]
    assert sorted(p.name for p in tmp_path.glob("step*.txt")) == [
        "step1.txt",
        "step2.txt",
        "step3.txt",
    ]


def test_no_budget_follows_one_that_changed_nothing_or_the_last(tmp_path: Path) -> None:
    idle = [read("a.py"), read("b.py"), write(1)]
    op, events = operator(tmp_path, idle, budgets=3)
    resp = drive(op, "look around")
    assert resp.error_kind == "IterationLimit" and not (tmp_path / "step1.txt").exists()
    assert not [e for e in events if isinstance(e, BudgetRenewed)]

    busy = [write(1), write(2), write(3), write(4), write(5)]
    op, events = operator(tmp_path, busy, budgets=2)
    resp = drive(op, "keep writing")
    assert resp.error_kind == "IterationLimit"
    assert (tmp_path / "step4.txt").exists() and not (tmp_path / "step5.txt").exists()
    assert [e for e in events if isinstance(e, BudgetRenewed)] == [BudgetRenewed(2, 2)]


@needs_bwrap
def test_auto_tests_false_leaves_the_tests_to_the_model(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    workspace = home / "proj"
    ws.rename(workspace)
    fixed = tool_call("replace_function", {"path": "calc/ops.py", "name": "add", "code": FIXED})
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        server.script(tool_reply(fixed), text_reply("Fixed add()."))
        done = rune(
            home,
            "run",
            "--workspace",
            str(workspace),
            "--yes",
            TASK,
            env={"OLLAMA_HOST": server.url, "RUNE_AUTO_TESTS": "false"},
        )
        assert server.count("/api/chat") == 2
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert "[by Rune]" not in done.stdout and "Fixed add()." in done.stdout


def test_without_pytest_tests_unittest_cannot_run_are_no_pass(tmp_path: Path) -> None:
    """An interpreter without pytest falls back to unittest, which does not see pytest-style
    tests: that is "no test ran", never "the tests pass"."""
    import subprocess
    import sys

    from rune.tools.commands import Outcome
    from rune.tools.testing import _BOOTSTRAP, verdict

    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert 1 == 2\n")
    (tmp_path / "pytest.py").write_text("raise ImportError('no pytest here')\n")
    done = subprocess.run(
        [sys.executable, "-c", _BOOTSTRAP, "test_plain.py"],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        check=False,
    )
    output = done.stdout + done.stderr
    trial = verdict(Outcome(done.returncode, False, output, b"", len(output)), tmp_path)
    assert not trial.passed and trial.own_fault
    # one line, not unittest's report (its "OK" and exit code 5 read like a result)
    assert trial.report.startswith("no test ran: pytest is not installed for ")
    assert "\n" not in trial.report and "OK" not in trial.report


# --- a repair that makes fewer tests fail ---------------------------------------------------

STUB = "def sign(x):\n    raise NotImplementedError\n"
TEST_SIGN = """\
import unittest

from calc.ops import sign


class TestSign(unittest.TestCase):
    def test_positive(self):
        self.assertEqual(sign(5), 1)

    def test_negative(self):
        self.assertEqual(sign(-5), -1)

    def test_zero(self):
        self.assertEqual(sign(0), 0)
"""
ONE = "def sign(x):\n    return 1\n"
TWO = "def sign(x):\n    return 1 if x > 0 else -1\n"
ALL = "def sign(x):\n    return (x > 0) - (x < 0)\n"


def sign(code: str) -> dict[str, Any]:
    return turn(
        tool="replace_function", arguments={"path": "calc/ops.py", "name": "sign", "code": code}
    )


@needs_bwrap
def test_a_sample_that_makes_fewer_tests_fail_takes_the_place_of_a_stuck_change(
    ws: Path,
) -> None:
    """A spec task: no sample passes every test, but one passes more than the code does; it
    is offered, and the repair it earns (one more) finds the change that passes them all."""
    (ws / "calc" / "ops.py").write_text(STUB)
    (ws / "tests" / "test_calc.py").write_text(TEST_SIGN)
    transport = ScriptedTransport(
        [
            sign(ONE),  # passes 1 of the 3 tests: the sampled repair looks for better
            *(sign(ONE), sign("def sign(x):\n    return -1\n"), sign(TWO)),  # its samples
            *[sign("def sign(x):\n    return 0\n")] * (SAMPLES - 3),
            sign(TWO),  # the model sends what the file holds now: a second repair
            *(sign(ONE), sign(ALL)),  # its samples: the second passes every test
        ]
    )
    task = "Write sign() in calc/ops.py. The tests in tests/test_calc.py must pass."
    loop = runtime(ws, transport)
    resp = approve_all(loop, loop.run([{"role": "user", "content": task}]))
    assert (ws / "calc" / "ops.py").read_text() == ALL
    assert resp.success and resp.incomplete is None
    changes = [e.arguments["code"] for e in resp.events if e.name == "replace_function"]
    assert changes == [TWO, ALL]  # 2 of 3 in place of the model's 1 of 3, then all 3
    fewer = "this one, written from a fresh start, leaves 1 failing instead of 2"
    assert any(fewer in w for w in resp.warnings)
    assert any("this one passes them" in w for w in resp.warnings)
    # the second repair asks from the same fresh start with seeds of its own: the first's
    # seeds would draw the very samples it already tried
    seeds = [r.options["seed"] for r in transport.requests if r.options and "seed" in r.options]
    assert seeds == [FIRST_SEED + k for k in range(SAMPLES + 2)]


NEG = "def neg(x):\n    return x\n"
NEG_FIXED = "def neg(x):\n    return -x\n"
TEST_NEG = """\
import unittest

from calc.signs import neg


class TestNeg(unittest.TestCase):
    def test_neg(self):
        self.assertEqual(neg(2), -2)
"""


def fix_two_bugs(ws: Path, *replies: dict[str, Any]) -> tuple[Any, ScriptedTransport]:
    """A run over two bugs, add() in calc/ops.py and neg() in calc/signs.py, each failing its
    own test: the model's ``replies``, then neg() fixed. Both must end fixed."""
    (ws / "calc" / "signs.py").write_text(NEG)
    (ws / "tests" / "test_signs.py").write_text(TEST_NEG)
    fix_neg = turn(
        tool="replace_function",
        arguments={"path": "calc/signs.py", "name": "neg", "code": NEG_FIXED},
    )
    transport = ScriptedTransport([*replies, fix_neg])
    task = "Two tests fail. Fix the bugs in calc (the tests are right)."
    loop = runtime(ws, transport)
    resp = approve_all(loop, loop.run([{"role": "user", "content": task}]))
    assert resp.success and resp.incomplete is None, resp.text
    assert (ws / "calc" / "ops.py").read_text() == FIXED
    assert (ws / "calc" / "signs.py").read_text() == NEG_FIXED
    return resp, transport


@needs_bwrap
def test_a_change_that_fixes_its_own_test_and_leaves_another_bug_s_is_taken_as_it_is(
    ws: Path,
) -> None:
    """Two bugs, each with its failing test: the change that fixes one leaves the other test
    failing as before. No sample could fix both in its place: none is drawn, and the run goes
    on to the second bug. (A change that leaves another test failing otherwise than before
    still earns a repair: the test above, where ``return 1`` moves test_negative's error.)"""
    resp, transport = fix_two_bugs(ws, change(FIXED))  # test_neg still fails as it did
    assert len(transport.requests) == 2  # no sample, no rewrite afresh
    assert not any("other changes" in w for w in resp.warnings)


@needs_bwrap
def test_a_repair_stops_at_the_first_sample_that_fixes_its_own_test_and_leaves_the_other_s(
    ws: Path,
) -> None:
    """Two bugs: the model's change to add() is wrong, so a repair draws samples. The first
    that fixes add() and leaves test_neg failing as before is all a change in its place could
    do: the drawing stops there (the script holds no more samples), and the run goes on to
    the second bug."""
    resp, transport = fix_two_bugs(
        ws,
        change(WRONG),  # test_add fails otherwise than before: a repair
        change(WRONG),  # the first sample: the reply again, not tried twice
        change(FIXED),  # the second: test_neg alone fails, as it did
    )
    assert len(transport.requests) == 4
    fewer = "none of 2 other changes it wrote passes them; this one, written from a fresh start"
    assert any(fewer in w and "leaves 1 failing instead of 2" in w for w in resp.warnings)


def test_a_tally_is_read_from_either_runner_s_summary() -> None:
    assert tally("the tests failed (Ran 6 tests in 0.001s: FAILED (failures=3))\n\n") == (6, 3)
    assert tally("the tests failed (Ran 4 tests in 0s: FAILED (failures=1, errors=2))") == (4, 3)
    assert tally("the tests failed (1 failed, 5 passed, 2 warnings in 0.05s)") == (6, 1)
    # a module that no longer imports: one error, nothing else ran (not fewer failing)
    assert tally("the tests failed (1 error in 0.1s)") == (1, 1)
    assert tally("the tests failed:\nno summary") is None
