"""The docstring examples (``>>>``) of the functions a failing test runs, run as checks run.

A test of ``titleize`` failed for a bug in the ``humanize`` it calls, and the 1.5B, shown all
three functions the test runs, changed ``underscore``. The library's own docstrings said which
one was wrong: ``humanize("employee_salary")`` gave ``'Employeesalary'`` where its example
says ``'Employee salary'``, and ``underscore``'s examples passed. In 19 of the 25 bugs of the
repo-level suite the function with the bug has examples that fail because of it, and in 18
the digest shows that function (``bench/README.md``). So where a failing test's digest shows
functions with examples, Rune runs those examples (contained and read-only, as ``run_python``
runs a check) and, when one fails, says the first that fails in each function and which
functions' examples pass. Examples are the project's own word, as its tests are; they run
only in a digest of the project's tests, never in place of them.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rune.errors import RuneError
from rune.tools.base import ToolContext
from rune.tools.checks import run_read_only
from rune.tools.display import for_display
from rune.tools.fs import read_project_source

__all__ = [
    "EXAMPLES_TIMEOUT",
    "SHOWN_EXAMPLES",
    "Examples",
    "examples_note",
    "has_examples",
    "module_of",
    "run_examples",
]

#: functions whose examples one digest runs
SHOWN_EXAMPLES = 3
#: seconds the examples of one digest may take (a bug may make one loop forever)
EXAMPLES_TIMEOUT = 20
#: characters of an example's code, expected or actual output shown
SHOWN_CHARS = 160
#: how the runner marks its own lines among what the code under test prints
_MARK = "rune-examples: "

_RUNNER = """\
import ast, doctest, importlib, json, sys
for spec in sys.argv[1:]:
    base, module, name = spec.split("\\t")
    if base and base not in sys.path:
        sys.path.insert(0, base)
    record = {"name": name, "attempted": 0, "failed": 0, "first": None}
    failures = []

    def plain(source):
        try:  # one line, comments dropped: a comment would hide what follows it
            return "; ".join(ast.unparse(node) for node in ast.parse(source).body)
        except (SyntaxError, ValueError):
            return source.strip()

    def code(test, example):
        # with the lines before it that set up what it uses (t = tail(3, "ABCDEFG")), at most 2
        before = test.examples[: test.examples.index(example)]
        setup = [plain(e.source) for e in before if not e.want.strip()][-2:]
        return "; ".join([*setup, plain(example.source)])

    class Runner(doctest.DocTestRunner):
        def report_failure(self, out, test, example, got):
            failures.append([code(test, example), example.want.strip(), got.strip()])

        def report_unexpected_exception(self, out, test, example, exc_info):
            got = f"{exc_info[0].__name__}: {exc_info[1]}"
            failures.append([code(test, example), example.want.strip(), got])

    try:
        owner = importlib.import_module(module)
        tests = doctest.DocTestFinder(recurse=False).find(
            getattr(owner, name), name, module=owner, globs=vars(owner)
        )
        runner = Runner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        for test in tests:
            runner.run(test, out=lambda text: None)
        record.update(attempted=runner.tries, failed=len(failures))
        record["first"] = failures[0] if failures else None
    except BaseException as err:
        record["error"] = f"{type(err).__name__}: {err}"
    print("\\n" + MARK + json.dumps(record), flush=True)
""".replace("MARK", repr(_MARK))


@dataclass(frozen=True, slots=True)
class Examples:
    """What one function's examples did: how many ran and failed, and the first failure as
    (code, expected, actual); ``error`` when they could not run (import failed, say)."""

    path: str
    name: str
    attempted: int = 0
    failed: int = 0
    first: tuple[str, str, str] | None = None
    error: str | None = None


def has_examples(workspace: Path, path: str, name: str) -> bool:
    """Whether ``path`` (relative to the workspace) defines a top-level function ``name``
    whose docstring holds an example (``>>>``)."""
    text = read_project_source(workspace / path, workspace)
    if text is None:
        return False  # not the project's own code (rune.tools.fs.read_project_source)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return ">>>" in (ast.get_docstring(node) or "")
    return False


def module_of(path: str) -> tuple[str, str] | None:
    """(the directory to import from, the module) of a workspace-relative ``.py`` path:
    ``pkg/mod.py`` -> ("", "pkg.mod"), ``src/pkg/__init__.py`` -> ("src", "pkg")."""
    parts = list(PurePosixPath(path).parts)
    if not parts or not parts[-1].endswith(".py"):
        return None
    base = parts.pop(0) if len(parts) > 1 and parts[0] in ("src", "lib") else ""
    parts[-1] = parts[-1][:-3]
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(part.isidentifier() for part in parts):
        return None
    return base, ".".join(parts)


def run_examples(ctx: ToolContext, functions: Sequence[tuple[str, str]]) -> list[Examples]:
    """The examples of each (path, name) of ``functions`` that has some, the first
    :data:`SHOWN_EXAMPLES` of them, run in one contained interpreter; empty when none has
    examples or they could not run at all."""
    chosen: list[tuple[str, str, str, str]] = []
    for path, name in functions:
        where = module_of(path)
        if where is None or not has_examples(ctx.workspace, path, name):
            continue
        chosen.append((path, name, *where))
        if len(chosen) == SHOWN_EXAMPLES:
            break
    if not chosen:
        return []
    specs = [f"{base}\t{module}\t{name}" for _, name, base, module in chosen]
    try:
        outcome = run_read_only(ctx, ["-c", _RUNNER, *specs], timeout=EXAMPLES_TIMEOUT)
    except RuneError:
        return []
    # one record per function, in order: a function without one never finished (its
    # examples hung, or ended the interpreter), nor did those after it
    records: list[dict[str, object]] = []
    for line in (outcome.head + outcome.tail).decode("utf-8", "replace").splitlines():
        if line.startswith(_MARK):
            try:
                record = json.loads(line[len(_MARK) :])
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
    found: list[Examples] = []
    for index, (path, name, _, _) in enumerate(chosen):
        record = records[index] if index < len(records) else None
        if record is None or record.get("name") != name:
            found.append(Examples(path, name, error="its examples did not finish"))
            continue
        first = record.get("first")
        found.append(
            Examples(
                path,
                name,
                attempted=_count(record.get("attempted")),
                failed=_count(record.get("failed")),
                first=(
                    (str(first[0]), str(first[1]), str(first[2]))
                    if isinstance(first, list) and len(first) == 3
                    else None
                ),
                error=str(record["error"]) if record.get("error") else None,
            )
        )
    return found


def examples_note(found: Sequence[Examples]) -> str:
    """What the examples said, for the digest: the functions whose examples fail, the innermost
    first (a digest shows a function before those it calls), then those whose examples pass.
    Empty when no example fails."""
    failing = [e for e in reversed(found) if e.failed and e.first is not None]
    passing = [e for e in found if e.attempted and not e.failed and e.error is None]
    if not failing:
        # examples that all pass say nothing of where the bug is, and a small model reads
        # the digest again after every change
        return ""
    lines = ["Examples in the docstrings of the code it runs:"]
    for e in failing:
        code, want, got = (_short(text) for text in e.first or ("", "", ""))
        lines.append(
            f"  {for_display(e.name)} ({for_display(e.path)}): {code} gives {got}, but its "
            f"docstring says {want or '(no output)'}"
            + (f" ({e.failed} of its {e.attempted} examples fail)" if e.failed > 1 else "")
        )
    for e in passing:
        count = f"its {e.attempted} examples pass" if e.attempted > 1 else "its example passes"
        lines.append(f"  {for_display(e.name)}: {count}")
    return "\n".join(lines)


def _short(text: str) -> str:
    one = " ".join(line.strip() for line in text.splitlines() if line.strip())
    one = one if len(one) <= SHOWN_CHARS else one[: SHOWN_CHARS - 3] + "..."
    return for_display(one)


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
