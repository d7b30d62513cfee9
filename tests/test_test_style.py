"""Which runner a project's tests run under: unittest for a project written for it, even where
the interpreter has pytest; pytest for everything else (rune.tools.test_style)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_test_driven import FIXED, TEST_CALC, calc_project, executor, needs_bwrap

from rune.errors import ToolError
from rune.tools.test_style import module_name, runs_with_unittest

#: a pytest the workspace's interpreter imports: it says so, and counts a made-up result
FAKE_PYTEST = """\
def main(args):
    print("PYTEST RAN", *args)
    print("7 passed in 0.01s")
    return 0
"""
TESTS = ["tests/test_calc.py"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return calc_project(tmp_path / "ws")


def test_testcase_files_with_no_pytest_config_are_for_unittest(ws: Path) -> None:
    assert runs_with_unittest(ws, TESTS)
    (ws / "tests" / "test_more.py").write_text(
        "from unittest import TestCase\n\nclass T(TestCase):\n    def test_x(self):\n        pass\n"
    )
    assert runs_with_unittest(ws, [*TESTS, "tests/test_more.py"])


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("pytest.ini", ""),
        (".pytest.ini", "[pytest]\n"),
        ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-q'\n"),
        ("tox.ini", "[tox]\n\n[pytest]\nmarkers = slow\n"),
        ("setup.cfg", "[tool:pytest]\ntestpaths = tests\n"),
        ("conftest.py", ""),
        ("tests/conftest.py", "import pytest\n"),
    ],
)
def test_a_project_that_configures_pytest_runs_under_it(ws: Path, name: str, content: str) -> None:
    (ws / name).write_text(content)
    assert not runs_with_unittest(ws, TESTS)


def test_a_config_that_says_nothing_of_pytest_leaves_unittest(ws: Path) -> None:
    (ws / "pyproject.toml").write_text("[project]\nname = 'calc'\n")
    (ws / "tox.ini").write_text("[testenv]\ncommands = python -m unittest\n")
    assert runs_with_unittest(ws, TESTS)


@pytest.mark.parametrize(
    "content",
    [
        TEST_CALC + "\nimport pytest\n",
        TEST_CALC + "\nfrom _pytest.monkeypatch import MonkeyPatch\n",
        TEST_CALC + "\ndef test_plain():\n    assert True\n",
        "def test_plain():\n    assert True\n",
        "class TestPlain:\n    def test_x(self):\n        assert True\n",
        "def broken(:\n",
    ],
)
def test_a_file_that_uses_pytest_or_cannot_be_read_runs_under_pytest(
    ws: Path, content: str
) -> None:
    (ws / "tests" / "test_calc.py").write_text(content)
    assert not runs_with_unittest(ws, TESTS)


def test_what_unittest_would_import_otherwise_than_pytest_runs_under_pytest(
    ws: Path, tmp_path: Path
) -> None:
    """unittest imports a test file by module name from the workspace: a directory without
    ``__init__.py`` is a namespace package, which an installed package of the same name
    (a sdist's stray ``tests``, the standard library's ``test``) wins over; pytest would put
    the directory itself on the path. A path not in its plain form is not a module name."""
    assert module_name(ws, "tests/test_calc.py") == "tests.test_calc"
    assert module_name(ws, "./tests/test_calc.py") is None
    assert module_name(ws, "tests//test_calc.py") is None
    assert module_name(ws, "tests/") is None
    (ws / "test").mkdir()
    (ws / "test" / "test_json.py").write_text(TEST_CALC)
    assert module_name(ws, "test/test_json.py") is None
    assert not runs_with_unittest(ws, ["test/test_json.py"])
    (ws / "my-tests").mkdir()
    (ws / "my-tests" / "__init__.py").write_text("")
    (ws / "my-tests" / "test_calc.py").write_text(TEST_CALC)
    assert not runs_with_unittest(ws, ["my-tests/test_calc.py"])
    # a link out of the workspace is not read on the host: unsure, so pytest
    outside = tmp_path / "elsewhere.py"
    outside.write_text(TEST_CALC)
    (ws / "tests" / "test_link.py").symlink_to(outside)
    assert not runs_with_unittest(ws, ["tests/test_link.py"])
    assert not runs_with_unittest(ws, [])


@pytest.mark.parametrize(
    "content",
    [
        # a class pytest collects and unittest never runs
        TEST_CALC + "\nclass TestPlain:\n    def test_x(self):\n        assert False\n",
        # a base named like a test case that is not one (from elsewhere)
        "from helpers import BaseTestCase\n\nclass TestX(BaseTestCase):\n    pass\n",
        # nested past the parser's stack: MemoryError, not a crash of the run
        "x = " + "-" * 100_000 + "1\n",
    ],
)
def test_what_unittest_would_not_run_whole_runs_under_pytest(ws: Path, content: str) -> None:
    (ws / "tests" / "test_calc.py").write_text(content)
    assert not runs_with_unittest(ws, TESTS)


def test_a_test_case_through_a_base_of_the_same_file_is_for_unittest(ws: Path) -> None:
    (ws / "tests" / "test_calc.py").write_text(
        "import unittest\n\nclass Base(unittest.TestCase):\n    pass\n\n"
        "class TestAdd(Base):\n    def test_x(self):\n        pass\n"
    )
    assert runs_with_unittest(ws, TESTS)


def test_pytest_config_beside_the_tests_counts(ws: Path) -> None:
    (ws / "tests" / "pytest.ini").write_text("[pytest]\n")
    assert not runs_with_unittest(ws, TESTS)


@needs_bwrap
def test_unittest_runs_a_unittest_project_where_pytest_is_installed(ws: Path) -> None:
    (ws / "pytest.py").write_text(FAKE_PYTEST)
    tools = executor(ws)
    with pytest.raises(ToolError) as caught:
        tools.run("run_tests", {"tests": "tests/test_calc.py::TestAdd::test_add"})
    assert "Ran 1 test in" in str(caught.value) and "FAILED test_add" in str(caught.value)
    (ws / "calc" / "ops.py").write_text(FIXED)
    out = tools.run("run_tests", {})
    assert "Ran 2 tests in" in out and "PYTEST RAN" not in out, out
    # a trial that changes a test file: the choice was read from the files on disk
    changed = TEST_CALC.replace("self.assertEqual(add(0, 0), 0)", "pass")
    trial = tools.try_change(
        "write_file", {"path": "tests/test_calc.py", "content": changed}, "run_tests", {}
    )
    assert trial is not None and trial.report == "the tests pass: 7 passed in 0.01s", trial
    # the same files in a project that configures pytest go to pytest
    (ws / "pytest.ini").write_text("[pytest]\n")
    out = tools.run("run_tests", {})
    assert out == "the tests pass: 7 passed in 0.01s", out


@needs_bwrap
def test_pytest_runs_what_unittest_finds_no_test_in(ws: Path) -> None:
    (ws / "pytest.py").write_text(FAKE_PYTEST)
    (ws / "tests" / "test_calc.py").write_text(
        "import unittest\n\nclass TestNothingYet(unittest.TestCase):\n    pass\n"
    )
    assert runs_with_unittest(ws, TESTS)
    assert executor(ws).run("run_tests", {}) == "the tests pass: 7 passed in 0.01s"


@needs_bwrap
def test_a_project_too_big_to_walk_whole_runs_under_pytest(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """unittest is given the test files found by name; where the walk stopped before the end of
    the project, files past it may be pytest's, and unittest would not run them at all."""
    (ws / "pytest.py").write_text(FAKE_PYTEST)
    (ws / "calc" / "ops.py").write_text(FIXED)
    (ws / "zz_data").mkdir()  # walked after the tests
    for n in range(3):
        (ws / "zz_data" / f"{n}.txt").write_text("")
    assert "Ran 2 tests in" in executor(ws).run("run_tests", {})
    monkeypatch.setattr("rune.tools.testing.MAX_WALKED_FILES", 6)  # of the 8 files here
    assert executor(ws).run("run_tests", {}) == "the tests pass: 7 passed in 0.01s"


def test_a_unittest_failure_under_a_docstring_shows_its_traceback(ws: Path) -> None:
    """unittest prints a test's docstring between its header and the traceback; the digest
    read that line as the whole failure and showed no frame and no source."""
    import subprocess
    import sys

    from rune.tools.commands import Outcome
    from rune.tools.testing import verdict

    (ws / "calc" / "ops.py").write_text("def add(a, b):\n    return a - b\n")
    test = TEST_CALC.replace(
        "    def test_add(self):\n",
        '    def test_add(self):\n        """Ensure a proper sum."""\n',
    )
    (ws / "tests" / "test_calc.py").write_text(test)
    done = subprocess.run(
        [sys.executable, "-m", "unittest", "tests.test_calc"],
        cwd=ws,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert "Ensure a proper sum." in done.stderr.decode(), done.stderr
    output = done.stdout + done.stderr
    report = verdict(Outcome(done.returncode, False, output, b"", len(output)), ws).report
    assert "TestAdd.test_add)\n  AssertionError: -1 != 5\nTraceback in the project:" in report
    assert "calc/ops.py:\n    1  def add(a, b):\n    2      return a - b" in report, report
