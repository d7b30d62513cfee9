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
#: files where a project configures pytest, and the section that says so (None: any content)
_PYTEST_CONFIGS: tuple[tuple[str, str | None], ...] = (
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", "[tool.pytest"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)


def runs_with_unittest(workspace: Path, test_files: Sequence[str]) -> bool:
    """Whether the tests in ``test_files`` (workspace-relative) are for unittest: the project
    configures no pytest (no pytest config file or section, no ``conftest.py`` beside or above
    them), and each file is importable by module name, defines a ``TestCase`` class and uses
    nothing of pytest's (no ``import pytest``, no test function outside a class)."""
    if not test_files or len(test_files) > MAX_CHECKED_FILES:
        return False
    if _configures_pytest(workspace, test_files):
        return False
    return all(_is_unittest_file(workspace, file) for file in test_files)


def module_name(test_file: str) -> str | None:
    """``tests/test_mod.py`` as unittest imports it (``tests.test_mod``), or None when a part
    is not a Python name."""
    path = PurePosixPath(test_file)
    if path.suffix != ".py":
        return None
    parts = [*path.parent.parts, path.stem]
    if not all(part.isidentifier() for part in parts):
        return None
    return ".".join(parts)


def _configures_pytest(workspace: Path, test_files: Sequence[str]) -> bool:
    for name, section in _PYTEST_CONFIGS:
        path = workspace / name
        if not path.exists():
            continue
        if section is None:
            return True
        text = read_project_source(path, workspace)
        if text is None or section in text:
            return True
    directories = {PurePosixPath(".")}
    for file in test_files:
        directories.update(PurePosixPath(file).parents)
    return any((workspace / directory / "conftest.py").exists() for directory in directories)


def _is_unittest_file(workspace: Path, test_file: str) -> bool:
    if module_name(test_file) is None:
        return False
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
    except (SyntaxError, ValueError, RecursionError):
        return False
    if any(_imports_pytest(node) for node in ast.walk(tree)):
        return False
    if any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
        for node in tree.body
    ):
        return False
    return any(
        isinstance(node, ast.ClassDef) and any(_names_test_case(base) for base in node.bases)
        for node in ast.walk(tree)
    )


def _imports_pytest(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "pytest" for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] in {"pytest", "_pytest"}
    return False


def _names_test_case(base: ast.expr) -> bool:
    if isinstance(base, ast.Name):
        return base.id.endswith("TestCase")
    return isinstance(base, ast.Attribute) and base.attr.endswith("TestCase")
