"""The docstring examples of the code a failing test runs, in the digest ``run_tests`` shows.

Real files in a temp dir, the tests and the examples run contained (bubblewrap), as ``rune``
runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rune.errors import ToolError
from rune.tools.commands import bwrap_works, find_bwrap
from rune.tools.examples import Examples, examples_note, has_examples, module_of
from rune.tools.executor import SandboxPolicy, ToolExecutor

BWRAP = find_bwrap()
needs_bwrap = pytest.mark.skipif(
    BWRAP is None or not bwrap_works(BWRAP), reason="bubblewrap cannot build a sandbox here"
)

# titleize's test fails for a bug in the humanize it calls (inflection, planted)
WORDS = '''\
def humanize(word):
    """Underscores to spaces, first letter up.

    >>> humanize("employee_salary")
    'Employee salary'
    """
    word = word.replace("_", "")
    return word[:1].upper() + word[1:]


def underscore(word):
    """Dashes to underscores.

    >>> underscore("x-men")
    'x_men'
    """
    return word.replace("-", "_")


def titleize(word):
    """Every word capitalised.

    >>> titleize("active_record")
    'Active Record'
    """
    return " ".join(w.capitalize() for w in humanize(underscore(word)).split(" "))
'''
TEST_WORDS = """\
import unittest

from words.inflect import titleize


class TestTitleize(unittest.TestCase):
    def test_titleize(self):
        self.assertEqual(titleize("active_record"), "Active Record")
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    files = {"words/inflect.py": WORDS, "tests/test_words.py": TEST_WORDS}
    for name, text in {**files, "words/__init__.py": "", "tests/__init__.py": ""}.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


def failing_digest(ws: Path) -> str:
    executor = ToolExecutor(SandboxPolicy.default(home=ws.parent), ws)
    with pytest.raises(ToolError) as caught:
        executor.run("run_tests", {"tests": "tests/test_words.py"})
    return str(caught.value)


@needs_bwrap
def test_the_function_whose_own_examples_fail_is_named_first(ws: Path) -> None:
    digest = failing_digest(ws)
    note = digest.split("Examples in the docstrings of the code it runs:\n", 1)[1]
    lines = note.splitlines()
    # the innermost failing function first, with the example, what it gives, what it says
    assert lines[0] == (
        "  humanize (words/inflect.py): humanize('employee_salary') gives 'Employeesalary', "
        "but its docstring says 'Employee salary'"
    )
    assert lines[1].startswith("  titleize (words/inflect.py): titleize('active_record') gives")
    assert lines[2] == "  underscore: its example passes"
    # after the digest, which is compared run to run by what it says before the source
    assert digest.index("Source of the code it runs:") < digest.index("Examples in the")


@needs_bwrap
def test_examples_that_pass_and_code_without_examples_add_nothing(
    ws: Path,
) -> None:
    inflect = ws / "words" / "inflect.py"
    inflect.write_text(WORDS.replace('replace("_", "")', 'replace("_", " ")'))
    (ws / "tests" / "test_words.py").write_text(
        TEST_WORDS.replace('"Active Record")', '"Active  Record")')  # the test is wrong now
    )
    # examples that all pass say nothing of where the bug is: no note
    assert "Examples in the" not in failing_digest(ws)
    without = "\n".join(line for line in inflect.read_text().splitlines() if ">>>" not in line)
    inflect.write_text(without)
    assert "Examples in the" not in failing_digest(ws)


@needs_bwrap
def test_examples_that_end_the_interpreter_are_left_out(ws: Path) -> None:
    inflect = ws / "words" / "inflect.py"
    inflect.write_text(
        WORDS.replace(
            '    >>> underscore("x-men")',
            '    >>> import os; os._exit(3)\n    >>> underscore("x-men")',
        )
    )
    digest = failing_digest(ws)
    assert digest.startswith("the tests failed")
    # titleize's and humanize's examples ran (in the digest's order) and fail; underscore's
    # ended the interpreter, and say nothing
    note = digest.split("Examples in the docstrings of the code it runs:\n", 1)[1]
    assert [line.split(" ", 3)[2] for line in note.splitlines()] == ["humanize", "titleize"]


def test_only_the_project_s_own_modules_are_run(tmp_path: Path) -> None:
    assert module_of("pkg/mod.py") == ("", "pkg.mod")
    assert module_of("src/pkg/__init__.py") == ("src", "pkg")
    assert module_of("mod.py") == ("", "mod")
    # paths a test's own error text could forge into the digest
    for forged in ("../outside.py", "/etc/x.py", "pkg/my-mod.py", "pkg/mod.txt", "__init__.py"):
        assert module_of(forged) is None, forged
    outside = tmp_path / "outside.py"
    outside.write_text('def f():\n    """\n    >>> f()\n    """\n')
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "link.py").symlink_to(outside)
    assert has_examples(tmp_path, "outside.py", "f")
    assert not has_examples(tmp_path / "ws", "link.py", "f")


def test_what_an_example_prints_is_shown_on_one_line_and_short() -> None:
    hostile = Examples(
        "m.py", "f", attempted=1, failed=1, first=("f()", "1", "\x1b[31m" + "x" * 500)
    )
    note = examples_note([hostile])
    assert "\x1b" not in note and len(note) < 400
    assert examples_note([Examples("m.py", "g", error="its examples did not finish")]) == ""
