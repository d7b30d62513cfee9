"""Which runner a project's tests are written for: unittest, or pytest.

pytest runs unittest-style tests too, but a project whose tests are all ``unittest.TestCase``
classes and which configures no pytest is run by its authors with ``python -m unittest``
(more-itertools' tox.ini and Makefile do), and unittest's report is the one they read. Where
the interpreter also has pytest, running such tests under pytest changed what a small model
was shown and how it went: on the ``spec`` suite (unittest files, no pytest config) the same
code took a median 154.6 s under pytest against 110.9 s under unittest (bench/README.md).

Everything here is read on the host from files the repository may have forged, so it goes
through :func:`rune.tools.fs.read_project_source` and decides "pytest" whenever it is unsure:
pytest is the runner that sees every style.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from rune.tools.fs import read_project_source

#: test files read to decide (a project with more is run by pytest, which sees every style)
MAX_CHECKED_FILES = 50
#: test files' verdicts kept between runs
MAX_KEPT_VERDICTS = 256
_VERDICTS: dict[bytes, bool] = {}
_UNITTEST_CASES = frozenset({"TestCase", "IsolatedAsyncioTestCase"})
_PYTEST_MODULES = frozenset({"pytest", "_pytest"})
#: files where a project configures pytest, and the section that says so (None: any content)
_PYTEST_CONFIGS: tuple[tuple[str, str | None], ...] = (
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", "[tool.pytest"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)
PYTEST_CONFIG_NAMES = frozenset(name for name, _ in _PYTEST_CONFIGS)


def runs_with_unittest(workspace: Path, test_files: Sequence[str]) -> bool:
    """Whether the tests in ``test_files`` (workspace-relative) are for unittest: the project
    configures no pytest (no pytest config file or section, no ``conftest.py``, in the
    workspace or a directory on the way to them), each file is imported by the same module
    name under both runners (:func:`module_name`), defines a ``TestCase`` class and uses
    nothing of pytest's (no ``import pytest``, no test function or ``Test`` class that is not
    a ``TestCase``)."""
    if not test_files or len(test_files) > MAX_CHECKED_FILES:
        return False
    if any(module_name(workspace, file) is None for file in test_files):
        return False
    if _configures_pytest(workspace, test_files):
        return False
    return all(_is_unittest_file(workspace, file) for file in test_files)


def module_name(workspace: Path, test_file: str) -> str | None:
    """``tests/test_mod.py`` as unittest imports it (``tests.test_mod``), or None when a part
    is not a Python name, the path is not in its plain form (``./tests``), or a directory on
    the way has no ``__init__.py``. Then pytest imports it by the same name from the
    workspace, which comes first on ``sys.path``: a namespace package would lose to an
    installed one (a sdist's stray ``tests``, the standard library's ``test``), and pytest
    would put the directory itself on the path."""
    path = PurePosixPath(test_file)
    if str(path) != test_file or path.suffix != ".py" or path.is_absolute():
        return None
    parts = [*path.parent.parts, path.stem]
    if not all(part.isidentifier() for part in parts):
        return None
    packages = [workspace.joinpath(*path.parts[:n], "__init__.py") for n in range(1, len(parts))]
    if not all(_is_file(init) for init in packages):
        return None
    return ".".join(parts)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _configures_pytest(workspace: Path, test_files: Sequence[str]) -> bool:
    directories = {PurePosixPath(".")}
    for file in test_files:
        directories.update(PurePosixPath(file).parents)
    for directory in directories:
        if _is_file(workspace / directory / "conftest.py"):
            return True
        for name, section in _PYTEST_CONFIGS:
            path = workspace / directory / name
            if not _is_file(path):
                continue
            text = read_project_source(path, workspace)
            if section is None or text is None or section in text:
                return True
    return False


def _is_unittest_file(workspace: Path, test_file: str) -> bool:
    text = read_project_source(workspace / test_file, workspace)
    if text is None:
        return False
    # Decided before every test run, and a module of 200 KB takes 0.1 s to parse: the
    # verdicts are kept by the content's digest (not the content: 512 KiB a file).
    key = hashlib.blake2b(text.encode(), digest_size=16).digest()
    if key not in _VERDICTS:
        if len(_VERDICTS) >= MAX_KEPT_VERDICTS:
            _VERDICTS.clear()
        _VERDICTS[key] = _is_unittest_source(text)
    return _VERDICTS[key]


def _is_unittest_source(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # MemoryError: the parser's stack overflowed (a 100 KB expression nested too deep)
        return False
    if any(_imports_pytest(node) for node in ast.walk(tree)):
        return False
    if any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
        for node in tree.body
    ):
        return False
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    cases = _test_cases(classes)
    # a ``Test`` class unittest does not run is one pytest collects
    if any(c.name.startswith("Test") and c.name not in cases for c in classes):
        return False
    return bool(cases)


def _test_cases(classes: Sequence[ast.ClassDef]) -> set[str]:
    """The names of ``classes`` that derive from unittest's test cases, directly or through
    another of them."""
    cases: set[str] = set()
    grown = True
    while grown:
        grown = False
        for node in classes:
            if node.name not in cases and any(_is_case(base, cases) for base in node.bases):
                cases.add(node.name)
                grown = True
    return cases


def _is_case(base: ast.expr, cases: set[str]) -> bool:
    if isinstance(base, ast.Name):
        return base.id in _UNITTEST_CASES or base.id in cases
    return isinstance(base, ast.Attribute) and base.attr in _UNITTEST_CASES


def _imports_pytest(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] in _PYTEST_MODULES for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] in _PYTEST_MODULES
    return False
