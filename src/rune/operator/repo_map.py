"""The repository map: where things are in a workspace too big to put in the context whole.

A small model dropped into a library's checkout searched for ``test_mod.py`` at the top, found
nothing, and gave up; Aider's answer to the same problem is a map of the repository. Rune's is
compact, because a small model on two cores reads about 80 prompt tokens a second: the Python
files by folder, and the top-level definitions (with line numbers) of the few files the task
points at — the files it names, the modules its named tests import, the files defining the
names it mentions — within :data:`MAP_CHARS`. Read under the same policy as ``read_file``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from rune.operator.blocks import FILES_BUCKET, ContextBlock, is_small_workspace, read_text_file
from rune.text import for_display
from rune.tools.fs import MAX_PARSED_BYTES
from rune.tools.locate import project_files
from rune.tools.sandbox import SandboxPolicy

#: the map's size: about 600 tokens
MAP_CHARS = 2400
#: files whose definitions are listed
DETAILED_FILES = 3
#: files looked at at most (a bigger tree gets no map; no file over MAX_PARSED_BYTES is parsed)
MAX_FILES = 5000
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_PATH = re.compile(r"[\w./-]*\w\.py\b")
_TOP_LEVEL = re.compile(r"^(?:async[ \t]+def|def|class)[ \t]+([A-Za-z_]\w*)", re.MULTILINE)


def map_block(workspace: Path, policy: SandboxPolicy, request: str) -> ContextBlock | None:
    """The map for ``request``, or None when the workspace holds no Python files or too many
    files to walk."""
    if is_small_workspace(workspace, policy):
        return None  # it is in the context whole
    files = project_files(workspace, policy.read_roots, MAX_FILES)
    if len(files) > MAX_FILES:
        return None
    python = [name for name in files if name.endswith(".py")]
    if not python:
        return None
    ranked = _ranked(workspace, policy, python, request)
    lines = ["Repository map (Python files by folder; definitions with their line numbers):"]
    for name in ranked[:DETAILED_FILES]:
        definitions = _definitions(workspace, policy, name)
        if definitions:
            lines.append(f"{for_display(name)}: " + ", ".join(definitions))
    lines += _folders(python, set(ranked[:DETAILED_FILES]))
    text = _fitted(lines)
    return ContextBlock("map", text, FILES_BUCKET - 1, evictable=True)


def _fitted(lines: Sequence[str]) -> str:
    kept: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) + 1 > MAP_CHARS:
            room = MAP_CHARS - size - 1
            if room > 40:
                kept.append(line[: room - 4].rsplit(", ", 1)[0] + ", …")
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept)


def _folders(python: Sequence[str], detailed: set[str]) -> list[str]:
    by_folder: dict[str, list[str]] = {}
    for name in python:
        path = PurePosixPath(name)
        by_folder.setdefault(str(path.parent), []).append(path.name)
    lines = []
    for folder in sorted(by_folder, key=lambda f: (f.count("/"), f)):
        names = sorted(by_folder[folder])
        label = "(top)" if folder == "." else folder + "/"
        lines.append(f"{for_display(label)} {' '.join(for_display(n) for n in names)}")
    return lines


def _ranked(
    workspace: Path, policy: SandboxPolicy, python: Sequence[str], request: str
) -> list[str]:
    """The code files the task points at, most first (test files lead to what they import)."""
    score: dict[str, float] = {}
    named = _named(python, request)
    for name in named:
        score[name] = score.get(name, 0) + 10
        if _is_test(name):
            for imported in _imported(workspace, policy, name, python):
                score[imported] = score.get(imported, 0) + 4
    words = set(_WORD.findall(request))
    words |= {w.removeprefix("test_") for w in words if w.startswith("test_")}
    if words:
        for name in python[:400]:
            if _is_test(name) and name not in named:
                continue
            hits = words & set(_top_level_names(workspace, policy, name))
            if hits:
                score[name] = score.get(name, 0) + 3 + 2 * len(hits)
    # A named test is shown by the test run; the code it tests is what the map is for.
    return sorted((n for n in score if not _is_test(n)), key=lambda n: (-score[n], n))


def _named(python: Sequence[str], request: str) -> list[str]:
    found = []
    for mention in _PATH.findall(request):
        tail = "/" + mention.strip("./")
        found += [name for name in python if ("/" + name).endswith(tail) and name not in found]
    return found


def _is_test(name: str) -> bool:
    path = PurePosixPath(name)
    return path.name.startswith("test_") or path.name.endswith("_test.py") or "tests" in path.parts


def _imported(
    workspace: Path, policy: SandboxPolicy, test: str, python: Sequence[str]
) -> Iterable[str]:
    """The project files a test file imports from (``from pkg.mod import f``, ``import pkg``)."""
    tree = _parse(workspace, policy, test)
    if tree is None:
        return []
    modules: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.append(node.module)
            modules += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
    found: list[str] = []
    for module in modules:
        stem = module.replace(".", "/")
        for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
            for name in python:
                if (name == candidate or name.endswith("/" + candidate)) and name not in found:
                    found.append(name)
    return found


def _parse(workspace: Path, policy: SandboxPolicy, name: str) -> ast.Module | None:
    text = _text(workspace, policy, name)
    try:
        return ast.parse(text) if text is not None else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _top_level_names(workspace: Path, policy: SandboxPolicy, name: str) -> list[str]:
    """The names a file defines at its top level, read by pattern (hundreds of files are
    looked at; parsing them all would cost seconds a turn)."""
    text = _text(workspace, policy, name)
    return [m.group(1) for m in _TOP_LEVEL.finditer(text)] if text is not None else []


def _text(workspace: Path, policy: SandboxPolicy, name: str) -> str | None:
    data = read_text_file(workspace, policy, name, MAX_PARSED_BYTES)
    return data.decode("utf-8") if data is not None else None


def _definitions(workspace: Path, policy: SandboxPolicy, name: str) -> list[str]:
    """``name lineno`` of each top-level definition (a class's methods after it)."""
    tree = _parse(workspace, policy, name)
    if tree is None:
        return []
    shown = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            shown.append(f"{node.name} {node.lineno}")
        elif isinstance(node, ast.ClassDef):
            methods = [
                f"{node.name}.{m.name} {m.lineno}"
                for m in node.body
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
                and not (m.name.startswith("__") and m.name != "__init__")
            ]
            shown += [f"class {node.name} {node.lineno}", *methods]
    return [for_display(s) for s in shown]
