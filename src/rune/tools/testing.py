"""``run_tests``: the project's own tests as the check of a change.

A small model's own asserts are often wrong (on the task suite it once asserted the very bug it
was asked to fix); a project's tests are the user's word on what the code must do. So where the
workspace has tests, Rune offers ``run_tests``, and the loop runs the tests a task names itself
(:func:`plan_tests`): before the first model call, and again after each change, without a model
turn (docs/loop.md). They run as ``run_python``'s checks do: contained, nothing writable, no
network, so they need no approval.

The model is shown a digest, not pytest's whole report: each failing test (at most
:data:`SHOWN_FAILURES`), its error, the frames of its traceback in project code (not in tests
or installed libraries), and the source of the functions those frames point at — or, when the
traceback never leaves the test, of the project functions the test's failing line calls.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from rune.errors import TestsNotRun, ToolError, ToolInputError
from rune.tools.base import Args, BuiltinTool, ToolContext, object_schema, string_arg
from rune.tools.checks import can_run_contained, run_read_only, trial_binds
from rune.tools.command_paths import runs_or_reads, tests_named
from rune.tools.commands import Outcome, format_outcome
from rune.tools.display import for_display
from rune.tools.examples import examples_note, run_examples
from rune.tools.fs import read_project_source
from rune.tools.locate import is_skipped, project_files
from rune.tools.sandbox import SandboxPolicy
from rune.tools.spec import AutoCheck, ToolSpec, Trial
from rune.tools.test_style import PYTEST_CONFIG_NAMES, runs_with_unittest

#: seconds one test run may take
TEST_TIMEOUT = 60
#: failing tests shown in full (the others by name)
SHOWN_FAILURES = 2
#: lines of one function's source shown
SHOWN_SOURCE_LINES = 30
#: the functions a shown function calls in its own module, shown beside it
SHOWN_CALLEES = 2
#: the longest digest (a small model on two cores reads about 80 prompt tokens a second)
MAX_DIGEST_CHARS = 2400
#: test files looked for, and directories walked, before the search stops
MAX_TEST_FILES = 2000
MAX_WALKED_FILES = 20_000
_TEST_FILE = re.compile(r"(?:^test_.*|.*_test)\.py$")
_TEST_DIRS = frozenset({"tests", "test", "testing"})
#: what a task names as a test: ``path.py`` or ``path.py::name[::name...]``
# A parametrised test's id may hold spaces in its brackets (test_titleize[active_record-Active
# Record]): a bracket runs to its end.
_NAMED_TEST = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.py)((?:::[\w().,=-]+(?:\[[^\]\n]*\])?)*)"
)
_TARGET = re.compile(r"[^\s\[]+(?:\[[^\]\n]*\])?")
#: what a user writes when the tests are not to be touched
_TESTS_ARE_RIGHT = re.compile(
    r"\btests?\s+(?:are|is)\s+(?:right|correct|fine|ok)\b"
    r"|\b(?:do\s+not|don't|never)\s+(?:change|edit|modify|touch)\s+the\s+tests?\b"
    r"|\bbug\s+is\s+in\s+the\s+(?:library|code|implementation)\b",
    re.IGNORECASE,
)

# pytest when the interpreter has it, else unittest (which runs unittest-style tests only);
# unittest first when Rune found the tests written for it (``--unittest``,
# :mod:`rune.tools.test_style`), and pytest after all if unittest found no test in them (an
# error in a module's or class's set-up runs none, and is unittest's to report).
_BOOTSTRAP = """\
import sys
targets = sys.argv[1:]
prefer_unittest = targets[:1] == ["--unittest"]
targets = targets[1:] if prefer_unittest else targets
try:
    import pytest
except ImportError:
    pytest = None
if pytest is None or prefer_unittest:
    import unittest
    names = []
    for target in targets:
        path, _, rest = target.partition("::")
        module = path[:-3].replace("/", ".") if path.endswith(".py") else path
        names.append(".".join([module, *filter(None, rest.split("::"))]))
    argv = ["unittest", *names] if names else ["unittest", "discover"]
    program = unittest.main(module=None, argv=argv, exit=False, verbosity=1)
    if program.result.testsRun or not program.result.wasSuccessful():
        sys.exit(0 if program.result.wasSuccessful() else 1)
    if pytest is None:
        print(f"no test ran: pytest is not installed for {sys.executable}, and unittest found "
              "no unittest-style test; install pytest in the project's .venv")
        sys.exit(5)
options = ["-q", "--tb=native", "-p", "no:cacheprovider", "--color=no", "-rfE"]
sys.exit(pytest.main([*options, *targets]))
"""


# --- where the tests are ---------------------------------------------------------------------


def is_test_path(relative: str) -> bool:
    """Whether a workspace-relative path is a test file (or in a test directory)."""
    parts = Path(relative).parts
    if not parts or not parts[-1].endswith(".py"):
        return False
    return (
        bool(_TEST_FILE.match(parts[-1]))
        or parts[-1] == "conftest.py"
        or any(part in _TEST_DIRS for part in parts[:-1])
    )


def find_test_files(workspace: Path, policy: SandboxPolicy) -> list[str]:
    """The workspace's test files as pytest finds them (``test_*.py``, ``*_test.py``),
    relative, in walk order (bounded; hidden and build directories are not entered)."""
    return _test_files(workspace, policy)[0]


def _test_files(workspace: Path, policy: SandboxPolicy) -> tuple[list[str], bool]:
    """:func:`find_test_files`, and whether they are all of them (the walk did not stop)."""
    files = project_files(workspace, policy.read_roots, MAX_WALKED_FILES)
    tests = [n for n in files[:MAX_WALKED_FILES] if _TEST_FILE.match(PurePosixPath(n).name)]
    complete = len(files) <= MAX_WALKED_FILES and len(tests) <= MAX_TEST_FILES
    return tests[:MAX_TEST_FILES], complete


def named_tests(request: str, workspace: Path, files: Sequence[str]) -> list[str]:
    """The tests ``request`` names, as pytest ids relative to the workspace: a path as given
    when it is a test file there, else the one test file of that name in the tree."""
    by_name: dict[str, list[str]] = {}
    for file in files:
        by_name.setdefault(Path(file).name, []).append(file)
    known = set(files)
    named: list[str] = []
    for match in _NAMED_TEST.finditer(request):
        path, selector = match.group(1).lstrip("./"), match.group(2)
        if path not in known:
            candidates = by_name.get(Path(path).name, [])
            suffix = [f for f in candidates if f.endswith("/" + path)]
            chosen = suffix if len(suffix) == 1 else candidates
            if len(chosen) != 1:
                continue
            path = chosen[0]
        test_id = path + selector
        if test_id not in named:
            named.append(test_id)
    return named


@dataclass(frozen=True, slots=True)
class PlannedTests:
    """The tests Rune runs itself for one request (``tests`` empty: all of them), and whether
    the request said they are right (then a change to a test file is refused)."""

    tests: tuple[str, ...]
    tests_are_right: bool
    #: the workspace's test files, relative (what a command must not reach)
    test_files: tuple[str, ...] = ()

    @property
    def arguments(self) -> dict[str, Any]:
        return {"tests": " ".join(self.tests)} if self.tests else {}

    @property
    def what(self) -> str:
        return f"the tests {', '.join(self.tests)}" if self.tests else "the project's tests"

    def refusal(self, workspace: Path, arguments: Mapping[str, Any]) -> str | None:
        """Why a change with ``arguments`` may not be made, or None: it changes a test file
        the request said is right (a file change's ``path``), or a ``command`` could
        (:mod:`rune.tools.command_paths`)."""
        if not self.tests_are_right:
            return None
        command = arguments.get("command")
        if isinstance(command, str):
            return self._command_refusal(workspace, command)
        raw = arguments.get("path")
        if not isinstance(raw, str):
            return None
        path = Path(raw) if Path(raw).is_absolute() else workspace / raw
        try:
            relative = path.resolve(strict=False).relative_to(workspace).as_posix()
        except ValueError:
            return None
        if not is_test_path(relative):
            return None
        return (
            f"{for_display(relative)} is a test file and the task says the tests are right: "
            "change the code under test instead."
        )

    def _command_refusal(self, workspace: Path, command: str) -> str | None:
        named = tests_named(command, workspace, is_test_path, self.test_files)
        if not named or runs_or_reads(command):
            return None
        shown = ", ".join(for_display(word) for word in named[:3])
        return (
            f"this command reaches the tests ({shown}) and the task says the tests are right: "
            "a command may run or read them, not change them; change the code under test "
            "instead."
        )


def plan_tests(request: str, workspace: Path, policy: SandboxPolicy) -> PlannedTests | None:
    """The tests to run for ``request``: the ones it names, else all of the workspace's; None
    when the workspace has no test file."""
    files = find_test_files(workspace, policy)
    if not files:
        return None
    right = bool(_TESTS_ARE_RIGHT.search(request))
    named = tuple(named_tests(request, workspace, files))
    return PlannedTests(named, tests_are_right=right, test_files=tuple(files))


def auto_check(request: str, workspace: Path, policy: SandboxPolicy) -> AutoCheck | None:
    """The tests the loop runs itself for ``request`` (:class:`rune.tools.spec.AutoCheck`),
    None when the workspace has none."""
    plan = plan_tests(request, workspace, policy)
    if plan is None:
        return None
    return AutoCheck(
        RUN_TESTS.spec.name,
        plan.arguments,
        plan.what,
        refusal=lambda arguments: plan.refusal(workspace, arguments),
    )


# --- running them ----------------------------------------------------------------------------


def _targets(args: Args) -> list[str]:
    raw = str(args.get("tests") or "")
    if "\0" in raw:
        raise ToolInputError("tests contains a NUL byte.")
    targets = _TARGET.findall(raw)
    for target in targets:
        path = target.partition("::")[0]
        if target.startswith("-") or Path(path).is_absolute() or ".." in Path(path).parts:
            raise ToolInputError(
                f"{for_display(target)} is not a test id: give test files or ids relative to "
                "the workspace, e.g. tests/test_mod.py::test_name."
            )
    return targets


def _run(ctx: ToolContext, targets: Sequence[str], over: Sequence[tuple[Path, Path]]) -> Trial:
    """The tests ``targets`` name; when they are test ids (``file::test``) and pass, their
    whole files too. A fix that makes the one named test pass can break its neighbours (the
    1.5B made ``percent_off(1000, 10)`` right and ``percent_off(999, 10)`` wrong), and a run
    must not end "Fixed" on that."""
    named = _run_once(ctx, targets, over)
    files = _files_of(targets)
    if not named.passed or not files:
        return named
    whole = _run_once(ctx, files, over)
    shown = ", ".join(for_display(f) for f in files)
    if whole.passed:
        rest = whole.report.removeprefix("the tests pass: ")
        return Trial(passed=True, report=f"{named.report}; all of {shown}: {rest}")
    if whole.own_fault:
        return named
    return Trial(
        passed=False,
        report=f"the tests named pass now, but other tests in {shown} fail: {whole.report}",
        asserted=whole.asserted,
    )


def _run_once(ctx: ToolContext, targets: Sequence[str], over: Sequence[tuple[Path, Path]]) -> Trial:
    argv = ["-c", _BOOTSTRAP, *_runner(ctx, targets, over), *targets]
    outcome = run_read_only(ctx, argv, over=over, timeout=TEST_TIMEOUT)
    return verdict(outcome, ctx.workspace)


def _runner(
    ctx: ToolContext, targets: Sequence[str], over: Sequence[tuple[Path, Path]] = ()
) -> list[str]:
    """The bootstrap's runner options for ``targets``: unittest first when the tests they name
    (all of the workspace's when none) are written for it, and unittest given the test files
    by name (its discovery skips directories that are not packages). Never for a trial that
    changes a test or a file beside the tests (a ``conftest.py``, a config): the decision is
    read from the files on disk."""
    if any(_touches_tests(ctx.workspace, target) for _, target in over):
        return []
    if targets:
        named = list(dict.fromkeys(target.partition("::")[0] for target in targets))
    else:
        named, complete = _test_files(ctx.workspace, ctx.policy)
        if not complete:  # tests past the walk's end may be pytest's, and unittest runs a list
            return []
    if not runs_with_unittest(ctx.workspace, named):
        return []
    return ["--unittest"] if targets else ["--unittest", *named]


def _touches_tests(workspace: Path, path: Path) -> bool:
    try:
        relative = path.relative_to(workspace).as_posix()
    except ValueError:
        return True
    return is_test_path(relative) or PurePosixPath(relative).name in PYTEST_CONFIG_NAMES


def _files_of(targets: Sequence[str]) -> list[str]:
    """The files of test ids among ``targets`` (none when no target is an id)."""
    if not any("::" in target for target in targets):
        return []
    files: list[str] = []
    for target in targets:
        file = target.partition("::")[0]
        if file not in files:
            files.append(file)
    return files


def run_tests(ctx: ToolContext, args: Args) -> str:
    trial = _run(ctx, _targets(args), ())
    if trial.own_fault:
        raise TestsNotRun(trial.report)
    if not trial.passed:
        # what the model reads (a repair's trials are judged by the tests alone)
        note = examples_note(run_examples(ctx, shown_functions(trial.report)))
        raise ToolError(f"{trial.report}\n\n{note}" if note else trial.report)
    return trial.report


def try_tests(ctx: ToolContext, args: Args, files: Mapping[Path, bytes]) -> Trial:
    """The tests run as if each path of ``files`` held its content (nothing written)."""
    targets = _targets(args)
    with trial_binds(files) as binds:
        return _run(ctx, targets, binds)


# --- what the model is shown -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Frame:
    file: str
    line: int
    function: str


@dataclass(frozen=True, slots=True)
class _Failure:
    title: str
    frames: tuple[_Frame, ...]
    error: tuple[str, ...]


_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")
_UNITTEST_HEADER = re.compile(r"^(?:FAIL|ERROR): (.+)$")
_FRAME_LINE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_SECTION_END = re.compile(r"^(?:={5,}|-{5,}|_{5,}$)")
_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+(?: in [\d.]+s)?.*?)\s*=*$")
# pytest's short summary ("FAILED tests/t.py::test_x - ..."), not unittest's "FAILED (failures=2)"
_SHORT_FAILED = re.compile(r"^(?:FAILED|ERROR) (?!\()(\S+)")
_NO_TESTS = 5  # pytest's exit status when it collected nothing


def verdict(outcome: Outcome, workspace: Path) -> Trial:
    """A test run as a :class:`Trial` whose report is the digest the model reads."""
    report = format_outcome(outcome, TEST_TIMEOUT)
    if outcome.exit_code == 0:
        return Trial(passed=True, report=f"the tests pass: {_summary(report) or 'exit code 0'}")
    if outcome.exit_code == _NO_TESTS:
        return Trial(passed=False, report=_no_test_ran(report), own_fault=True)
    failures = _failures(report)
    if not failures:
        return Trial(passed=False, report=f"the tests failed:\n{_cut(report)}")
    return Trial(
        passed=False,
        report=_digest(report, failures, workspace),
        asserted=any(f.error and f.error[0].startswith("AssertionError") for f in failures),
        failing=tuple((f.title, f.error[0] if f.error else "") for f in failures),
    )


_UNITTEST_FAILED = re.compile(r"\bRan (\d+) tests? in [^:]*: FAILED \(([^)]*)\)")
_UNITTEST_COUNT = re.compile(r"\b(?:failures|errors|unexpected successes)=(\d+)")
_PYTEST_COUNT = re.compile(r"\b(\d+) (passed|failed|errors?)\b")


def tally(report: str) -> tuple[int, int] | None:
    """``(tests run, tests failing)`` as the first line of a failed run's report (its digest)
    gives them; None when it gives no counts. unittest counts a failing subtest as a failure,
    so two tallies compare only when they ran the same number of tests."""
    line = report.split("\n", 1)[0]
    if match := _UNITTEST_FAILED.search(line):
        return int(match.group(1)), sum(int(n) for n in _UNITTEST_COUNT.findall(match.group(2)))
    counts = {word.rstrip("s") if word.startswith("error") else word: int(n)
              for n, word in _PYTEST_COUNT.findall(line)}  # fmt: skip
    if not counts:
        return None
    failing = counts.get("failed", 0) + counts.get("error", 0)
    return counts.get("passed", 0) + failing, failing


def _no_test_ran(report: str) -> str:
    """One line: why no test ran (the runner's own word when it gave one)."""
    for line in report.splitlines():
        if line.startswith("no test ran:"):
            return line
    summary = _summary(report)
    return f"no test ran: {summary}" if summary else "no test ran: no test matched"


def _summary(report: str) -> str | None:
    """pytest's last line ("1 failed, 3 passed in 0.1s"), or unittest's two ("Ran 4 tests in
    0.001s: FAILED (failures=1)")."""
    ran = status = None
    for line in reversed(report.splitlines()):
        stripped = line.strip("= ")
        if re.search(r"\b\d+ (?:passed|failed|error|errors|skipped)\b", stripped):
            return stripped
        if status is None and stripped.startswith(("OK", "FAILED (")):
            status = stripped
        elif ran is None and stripped.startswith("Ran "):
            ran = stripped
    if ran and status:
        return f"{ran}: {status}"
    return status or ran


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DIGEST_CHARS else text[-MAX_DIGEST_CHARS:]


def _failures(report: str) -> list[_Failure]:
    """Each failing test's block of a pytest ``--tb=native`` or unittest report. unittest puts
    the first line of a test's docstring under its header, and a rule of dashes between them
    and the traceback: what stands before that rule is not the failure."""
    failures: list[_Failure] = []
    title: str | None = None
    block: list[str] = []
    described = False  # a unittest header whose rule of dashes has not come yet

    def close() -> None:
        if title is not None:
            failures.append(_parse_block(title, block))

    for line in report.splitlines():
        header = _HEADER.match(line) or _UNITTEST_HEADER.match(line)
        if header:
            close()
            title, block = header.group(1), []
            described = _UNITTEST_HEADER.match(line) is not None
        elif described:
            described = not line.startswith("----")
        elif title is not None and (line.startswith("=====") or line.startswith("----")):
            if block:
                close()
                title, block = None, []
        elif title is not None:
            block.append(line)
    close()
    return failures


def _parse_block(title: str, lines: list[str]) -> _Failure:
    frames: list[_Frame] = []
    last_frame_at = -1
    for n, line in enumerate(lines):
        if match := _FRAME_LINE.match(line):
            frames.append(_Frame(match.group(1), int(match.group(2)), match.group(3)))
            last_frame_at = n
    tail = lines[last_frame_at + 1 :] if last_frame_at >= 0 else lines
    error = [line for line in tail if line.strip()]
    # after the last frame: its code line (indented), then the error and pytest's notes
    while error and error[0].startswith("    ") and last_frame_at >= 0:
        error.pop(0)
    return _Failure(title, tuple(frames), tuple(error[:8]))


def _digest(report: str, failures: list[_Failure], workspace: Path) -> str:
    parts = [f"the tests failed ({_summary(report) or 'see below'})"]
    shown: set[str] = set()  # sources shown for an earlier failure are not repeated
    for failure in failures[:SHOWN_FAILURES]:
        parts.append(_describe(failure, workspace, shown))
    if rest := _also_failing(report, failures, workspace):
        parts.append("Also failing: " + ", ".join(for_display(name) for name in rest[:10]))
    text = "\n\n".join(parts)
    if len(text) > MAX_DIGEST_CHARS:
        text = text[: MAX_DIGEST_CHARS - 40].rstrip() + "\n[... digest cut ...]"
    return text


#: a unittest failure's title: ``test_x (package.test_mod.Class.test_x)``, and a subtest's
#: parameters after it
_UNITTEST_TITLE = re.compile(r"^\w+ \(((?:\w+\.)+)(\w+)\.(\w+)\)")


def _also_failing(report: str, failures: list[_Failure], workspace: Path) -> list[str]:
    """The failing tests the digest does not show in full, as ids ``run_tests`` takes: pytest's
    short summary gives each; unittest's report has them only in its headers, so a test of a
    ``TestCase`` there becomes ``path.py::Class::test_x`` when that file exists (its title
    as it is otherwise). A test with failing subtests is named once."""
    named = [m.group(1) for line in report.splitlines() if (m := _SHORT_FAILED.match(line))]
    if named:
        return named[SHOWN_FAILURES:]
    ids = [_test_id(failure.title, workspace) for failure in failures]
    shown = set(ids[:SHOWN_FAILURES])
    return list(dict.fromkeys(i for i in ids[SHOWN_FAILURES:] if i not in shown))


def _test_id(title: str, workspace: Path) -> str:
    match = _UNITTEST_TITLE.match(title)
    if match is None:
        return title
    path = match.group(1)[:-1].replace(".", "/") + ".py"
    return f"{path}::{match.group(2)}::{match.group(3)}" if (workspace / path).is_file() else title


def _in_workspace(path: Path, workspace: Path) -> bool:
    """Whether ``path`` is a regular file whose real path lies in the workspace."""
    real = Path(os.path.realpath(path))
    return real.is_relative_to(os.path.realpath(workspace)) and real.is_file()


def _relative(file: str, workspace: Path) -> str | None:
    """``file`` relative to the workspace when it is the project's own code."""
    path = Path(file)
    if not path.is_absolute():
        path = workspace / path
    try:
        relative = path.relative_to(workspace).as_posix()
    except ValueError:
        return None
    parts = Path(relative).parts
    if any(is_skipped(part) for part in parts[:-1]):
        return None
    # "<string>" (the runner's own code) and the like are no file of the project
    return relative if _in_workspace(workspace / relative, workspace) else None


#: the headings of a failure's parts in a digest, after its error: what reads a digest back
#: (:func:`first_failure`, :mod:`rune.assists.tests`) finds its parts by them
TRACEBACK_HEADING = "Traceback in the project:"
TEST_HEADING = "The test:"
SOURCE_HEADING = "Source of the code it runs:"


def _describe(failure: _Failure, workspace: Path, seen: set[str]) -> str:
    """One failure: its error, its frames in the project, the test, and the source they run
    (each source once per digest: ``seen`` holds those shown already)."""
    lines = [f"FAILED {for_display(failure.title)}"]
    lines += [f"  {for_display(line.rstrip())}" for line in failure.error]
    own = [
        (relative, frame)
        for frame in failure.frames
        if (relative := _relative(frame.file, workspace)) is not None
    ]
    project = [(r, f) for r, f in own if not is_test_path(r)]
    if own:
        lines.append(TRACEBACK_HEADING)
        lines += [f"  {for_display(r)}:{f.line} in {for_display(f.function)}" for r, f in own]
    in_tests = [(r, f) for r, f in own if is_test_path(r)]
    if in_tests:
        # What the test asserts and with which values: the model may not read the test file
        # (a library's test file is too big to put in the context whole).
        relative, frame = in_tests[-1]
        test_source = _enclosing_source(workspace, workspace / relative, frame.line)
        if test_source:
            lines += [TEST_HEADING, f"{for_display(relative)}:\n{test_source}"]
    shown: list[str] = []
    if project:
        for relative, frame in reversed(project[-2:]):
            source = _enclosing_source(workspace, workspace / relative, frame.line)
            if source:
                shown.append(f"{for_display(relative)}:\n{source}")
    elif own:
        relative, frame = own[-1]
        shown += _called_sources(workspace, relative, frame.line)
    fresh = [source for source in shown if source not in seen]
    seen.update(shown)
    if fresh:
        lines.append(SOURCE_HEADING)
        lines += fresh
    elif shown:
        lines.append(f"{SOURCE_HEADING} shown above.")
    return "\n".join(lines)


#: a source a digest shows (``_describe``): its file's line, then numbered lines, decorators
#: first, down to the ``def`` with the function's name
_SHOWN_SOURCE = re.compile(
    r"^(?P<path>\S[^\n]*?)(?: \(\w+ calls it\))?:\n(?: +\d+  +@[^\n]*\n)*"
    r" +\d+  +(?:async +)?def +(?P<name>\w+)\(",
    re.MULTILINE,
)


def first_failure(digest: str) -> str | None:
    """The first failure a test digest shows, without the project source it shows for it:
    the test's name, its error, the frames and the test's own code (None: none shown)."""
    for block in digest.split("\n\n"):
        if block.startswith("FAILED "):
            return block.split(f"\n{SOURCE_HEADING}", 1)[0]
    return None


def shown_functions(digest: str) -> list[tuple[str, str]]:
    """The project functions (path, name) whose source a test digest shows, in its order, the
    tests' own left out: where the failure points, for a repair to write afresh."""
    found: list[tuple[str, str]] = []
    for match in _SHOWN_SOURCE.finditer(digest):
        shown = (match.group("path"), match.group("name"))
        if not is_test_path(shown[0]) and shown not in found:
            found.append(shown)
    return found


def _parse(path: Path, workspace: Path) -> tuple[ast.Module, list[str]] | None:
    """The module at ``path`` and its lines, when it is a file of ``workspace``: the digest
    is read on the host, so a link out of the workspace (a cloned repository's, or one a
    command made) is not followed, or a forged traceback would show any Python file the user
    can read."""
    text = read_project_source(path, workspace)
    if text is None:
        return None
    try:
        return ast.parse(text), text.splitlines()
    except (SyntaxError, ValueError, RecursionError):
        return None


def _numbered(lines: list[str], start: int, end: int) -> str:
    end = min(end, start + SHOWN_SOURCE_LINES - 1)
    return "\n".join(
        f"{n:>5}  {for_display(lines[n - 1], keep=chr(9))}" for n in range(start, end + 1)
    )


def _definitions(tree: ast.AST) -> Iterable[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _enclosing_source(workspace: Path, path: Path, line: int) -> str | None:
    parsed = _parse(path, workspace)
    if parsed is None:
        return None
    tree, lines = parsed
    best = _enclosing_function(tree, line)
    if best is None:
        return None
    start = min([best.lineno, *(d.lineno for d in best.decorator_list)])
    return _numbered(lines, start, best.end_lineno or best.lineno)


def _called_sources(workspace: Path, test_file: str, line: int) -> list[str]:
    """The project functions the test's failing line calls, found through the test file's
    imports (at most two); when it calls none (``self.assertEqual(actual, expected)``), those
    the test calls before it."""
    parsed = _parse(workspace / test_file, workspace)
    if parsed is None:
        return []
    tree, _ = parsed
    imported = _imports(tree)
    test = _enclosing_function(tree, line)
    first, last = _statement_lines(tree, line)
    shown = _sources_of(workspace, imported, _calls(tree, first, last))
    if not shown and test is not None:
        shown = _sources_of(workspace, imported, _calls(test, test.lineno, last))
    return shown


_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.TryStar,
    ast.Match, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
)  # fmt: skip


def _statement_lines(tree: ast.Module, line: int) -> tuple[int, int]:
    """The lines of the simple statement a traceback's ``line`` starts: a traceback names a
    call's first line, and an ``assertEqual(`` formatted over three lines has the call under
    test on the next (more-itertools' ``DistributeTest``). A compound statement's header is
    the line alone (its body is not what failed)."""
    simple = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt)
        and not isinstance(node, _COMPOUND)
        and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    innermost = max(simple, key=lambda node: node.lineno, default=None)
    if innermost is None:
        return line, line
    return innermost.lineno, innermost.end_lineno or line


def _enclosing_function(
    tree: ast.Module, line: int
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function whose lines hold ``line``."""
    inside = [n for n in _definitions(tree) if n.lineno <= line <= (n.end_lineno or n.lineno)]
    return max(inside, key=lambda n: n.lineno, default=None)


def _calls(tree: ast.AST, first: int, last: int) -> list[str]:
    """The names called (``f``, ``m.f``) by calls that reach into the lines ``first`` to
    ``last``, in their order."""
    spans = [
        (node.lineno, name)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and node.lineno <= last
        and (node.end_lineno or node.lineno) >= first
        and (name := _dotted(node.func)) is not None
    ]
    called: list[str] = []
    for _, name in sorted(spans, key=lambda span: span[0]):
        if name not in called:
            called.append(name)
    return called


def _sources_of(
    workspace: Path, imported: Mapping[str, tuple[str, str | None]], called: Sequence[str]
) -> list[str]:
    shown: list[str] = []
    for name in called:
        where = _resolve(imported, name)
        found = _source_in_module(workspace, *where) if where is not None else None
        if found is not None:
            shown.append(found)
        if len(shown) == 2:
            break
    return shown


def _resolve(imported: Mapping[str, tuple[str, str | None]], name: str) -> tuple[str, str] | None:
    """The module and top-level name a called ``f`` or ``m.f`` refers to, or None."""
    head, _, attribute = name.partition(".")
    if head not in imported:
        return None
    module, member = imported[head]
    if not attribute:
        return (module, member) if member is not None else None
    # m.f: m is a module (import m) or a module taken from a package (from p import m)
    return (module if member is None else f"{module}.{member}", attribute)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _imports(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """Local name -> (module, member): ``from m import f`` gives f -> (m, f); ``import m as
    x`` gives x -> (m, None)."""
    names: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = (alias.name, None)
    return names


def _source_in_module(workspace: Path, module: str, name: str) -> str | None:
    """The source of ``module``'s top-level ``name``, and of the functions of that module it
    calls (one level): a test of ``last`` fails for a bug in the ``tail`` it calls, and the
    1.5B, shown ``last`` alone, rewrote ``last``."""
    found = _definition_in_module(workspace, module, name)
    if found is None:
        return None
    path, tree, lines, node = found
    shown = for_display(path.relative_to(workspace).as_posix())
    parts = [f"{shown}:\n{_numbered(lines, node.lineno, node.end_lineno or node.lineno)}"]
    top = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    callees: list[str] = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
            callee = call.func.id
            if callee in top and callee != name and callee not in callees:
                callees.append(callee)
    for callee in callees[:SHOWN_CALLEES]:
        definition = top[callee]
        end = definition.end_lineno or definition.lineno
        parts.append(f"{shown} ({name} calls it):\n{_numbered(lines, definition.lineno, end)}")
    return "\n".join(parts)


def _definition_in_module(
    workspace: Path, module: str, name: str, *, follow: bool = True
) -> tuple[Path, ast.Module, list[str], ast.stmt] | None:
    """Where ``module`` defines its top-level ``name``; ``follow``: or the module it takes the
    name from with a relative import (``from .recipes import *`` in a package's
    ``__init__.py``: how more-itertools and toolz export their functions), one level."""
    relative = module.replace(".", "/")
    for base in (workspace, workspace / "src", workspace / "lib"):
        for candidate in (base / f"{relative}.py", base / relative / "__init__.py"):
            if not candidate.is_file():
                continue
            parsed = _parse(candidate, workspace)
            if parsed is None:
                return None
            tree, lines = parsed
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
                    node.name == name
                ):
                    return candidate, tree, lines, node
            if not follow:
                return None
            package = module if candidate.name == "__init__.py" else module.rpartition(".")[0]
            for source, original in _taken_from(tree, name):
                found = _definition_in_module(
                    workspace, f"{package}.{source}" if package else source, original, follow=False
                )
                if found is not None:
                    return found
            return None
    return None


def _taken_from(tree: ast.Module, name: str) -> list[tuple[str, str]]:
    """The sibling modules a module's relative imports may take ``name`` from, with the name
    it has there: ``from .m import *`` and ``from .m import f as name``."""
    found: list[tuple[str, str]] = []
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or node.level != 1 or not node.module:
            continue
        for alias in node.names:
            if alias.name == "*" or (alias.asname or alias.name) == name:
                found.append((node.module, name if alias.name == "*" else alias.name))
    return found


RUN_TESTS = BuiltinTool(
    ToolSpec(
        "run_tests",
        "Run the project's tests (pytest, or unittest) in the workspace; they can read the "
        "project but not change it, so they run without asking. Give test files or ids "
        "(space-separated, e.g. tests/test_mod.py::test_name), or nothing for all tests.",
        object_schema(
            {"tests": {**string_arg("Test files or ids, space-separated."), "maxLength": 500}},
            [],
        ),
        checks=True,
    ),
    run=run_tests,
    trial=try_tests,
    offered=lambda ctx: can_run_contained(ctx) and bool(find_test_files(ctx.workspace, ctx.policy)),
)
