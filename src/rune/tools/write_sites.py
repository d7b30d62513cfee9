"""The write sites of the ``rune`` package, found by reading its source.

:func:`unreviewed_write_sites` lists every call that opens a file for writing, or changes the
directory tree, outside the few reviewed places in ``ALLOWED_WRITE_SITES`` (the canary's
"single write choke point" claim, :mod:`rune.app.canary`; tests/test_choke_point.py also watches
the running process).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# (module, function) pairs reviewed to write: the atomic replace of a user file and the
# directory walk that creates missing parents for it. Anything new must be reviewed here.
ALLOWED_WRITE_SITES: frozenset[tuple[str, str]] = frozenset(
    {
        ("rune.tools.fs", "atomic_write"),
        ("rune.tools.fs", "_open_subdir"),
        # `rune undo` taking back a change that created a file: the same validation, the same
        # no-follow walk and digest check as atomic_write, then unlink through the parent handle.
        ("rune.tools.fs", "atomic_remove"),
        # Rune's own state and user-invoked setup, never reachable from a model's tool call:
        # the session journal and its lock, the approval key, the demo project, the canary's
        # scratch workspace.
        ("rune.sessions.journal", "JournalWriter.__init__"),
        ("rune.sessions.store", "_lock"),
        ("rune.sessions.store", "SessionStore.create"),
        # the listing's summary cache beside a journal, and `rune sessions rm/prune`, which
        # delete only a session directory under Rune's own data directory
        ("rune.sessions.store", "_write_summary"),
        # what an applied change replaced and wrote, kept for `rune undo` inside the session's
        # own directory (named by sha256 digests only, never by a path a model chose)
        ("rune.sessions.changes", "BlobStore.put"),
        # /dev/null on a standard descriptor the caller closed, or over a stdout whose reader
        # went away: nothing else is opened there
        ("rune.cli", "fill_closed_std_fds"),
        ("rune.cli", "silence_stdout"),
        # `rune acp`: the protocol's stream, a duplicate of stdout taken at start (no path)
        ("rune.acp.server", "_serve"),
        ("rune.sessions.store", "SessionStore.remove"),
        ("rune.pause.seal", "_create_key"),
        ("rune.app.demo", "create_demo_project"),
        # `rune check-model` and the task suite: a shipped task's project written into a new
        # private temporary directory (names from Rune's own task data, never from a model),
        # or the fixed scratch directory the benchmark's caller names, emptied and removed.
        ("rune.app.model_check", "Task.write"),
        ("rune.app.model_check", "run_task"),
        ("rune.app.model_check", "_scratch_dir"),
        # `rune pull`: the user's command, writing only into Rune's own models directory.
        ("rune.models.pull", "pull"),
        ("rune.models.pull", "_download"),
        ("rune.models.pull", "_assemble"),
        ("rune.models.pull", "_temporary_beside"),
        # ... and removing what an earlier pull left: `.partial` files in the models directory
        # and this user's `rune-pull-*` download directories, only those no pull holds locked.
        ("rune.models.pull", "_remove_if_abandoned"),
        # After a contained command: removes a git control file the command created in the
        # top .git (it did not exist before), through no-follow directory handles.
        ("rune.tools.containment", "_remove_created"),
        # An MCP server's stderr: an anonymous temporary file (no name, gone when closed),
        # never a path a model chose.
        ("rune.tools.mcp.client", "McpManager._transport"),
        # A check tried on a change before approval: a private temporary directory holding a
        # copy of the would-be file, bound read-only over it in the sandbox, then removed.
        ("rune.tools.checks", "trial_binds"),
        # A check's passwd, group and hosts: Rune's own text (no byte from a model) in a
        # private temporary directory of the process, bound read-only into its /etc.
        ("rune.tools.check_etc", "_written"),
        # A contained run's cgroups: child directories Rune creates under its own cgroups in
        # the cgroup file system (never a path a model chose), their pids.max and memory
        # limit, their removal after the run, and the removal of empty ones a killed Rune left.
        ("rune.tools.run_limits", "RunCgroup.__init__"),
        ("rune.tools.run_limits", "RunCgroup._make"),
        ("rune.tools.run_limits", "RunCgroup._limit_memory"),
        ("rune.tools.run_limits", "_remove"),
        ("rune.tools.run_limits", "_sweep"),
        # The embedded server's prompt-cache directory, under Rune's own data directory
        # (llama.cpp writes the saved slot there itself).
        ("rune.models.embedded", "EmbeddedLlamaServer._params"),
        ("rune.app.canary", "check_approve_from_serialized_state"),
        ("rune.app.canary", "main"),
    }
)

_WRITE_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"})
_TREE_CHANGERS: dict[str, frozenset[str]] = {
    "os": frozenset(
        {
            "rename",
            "replace",
            "renames",
            "remove",
            "unlink",
            "rmdir",
            "removedirs",
            "mkdir",
            "makedirs",
            "link",
            "symlink",
            "truncate",
            "mkfifo",
            "mknod",
            "chmod",
            "chown",
        }
    ),
    "shutil": frozenset(
        {"copy", "copy2", "copyfile", "copytree", "copymode", "copystat", "move", "rmtree"}
    ),
    "tempfile": frozenset(
        {
            "mkstemp",
            "mkdtemp",
            "NamedTemporaryFile",
            "TemporaryFile",
            "SpooledTemporaryFile",
            "TemporaryDirectory",
        }
    ),
}
# Methods that only pathlib.Path (or file-like writers) have; str.replace is not among them.
_WRITING_METHODS = frozenset(
    {
        "write_text",
        "write_bytes",
        "touch",
        "mkdir",
        "rename",
        "symlink_to",
        "hardlink_to",
        "unlink",
        "rmdir",
    }
)


@dataclass(frozen=True)
class WriteSite:
    module: str
    function: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} in {self.function}(): {self.what}"


def _literal_mode(node: ast.expr | None) -> str | None:
    if node is None:
        return "r"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _names_in(node: ast.AST, constants: dict[str, ast.expr], seen: frozenset[str]) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        name = sub.attr if isinstance(sub, ast.Attribute) else getattr(sub, "id", None)
        if name is None:
            continue
        names.add(name)
        if name in constants and name not in seen:
            names |= _names_in(constants[name], constants, seen | {name})
    return names


def _call_arg(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[position] if len(call.args) > position else None


def _classify(call: ast.Call, constants: dict[str, ast.expr]) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id == "open":
        mode = _literal_mode(_call_arg(call, 1, "mode"))
        if mode is None or set(mode) & set("wax+"):
            return f"open(..., mode={mode or '<not a literal>'})"
        return None
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    if owner == "os" and func.attr == "open":
        flags = _call_arg(call, 1, "flags")
        if flags is None:
            return None
        hits = _names_in(flags, constants, frozenset()) & _WRITE_FLAGS
        return f"os.open(..., {'|'.join(sorted(hits))})" if hits else None
    if owner in ("os", "io") and func.attr in ("fdopen", "open"):
        mode = _literal_mode(_call_arg(call, 1, "mode"))
        if mode is None or set(mode) & set("wax+"):
            return f"{owner}.{func.attr}(..., mode={mode or '<not a literal>'})"
        return None
    if owner in _TREE_CHANGERS and func.attr in _TREE_CHANGERS[owner]:
        return f"{owner}.{func.attr}(...)"
    if func.attr == "open" and owner not in ("os", "io"):
        # Path.open(mode): a positional non-literal is more likely some other object's open()
        # (a session store's); the runtime audit test covers what this cannot see.
        mode_node = _call_arg(call, 0, "mode")
        keyword = any(kw.arg == "mode" for kw in call.keywords)
        mode = _literal_mode(mode_node)
        if (mode is not None and set(mode) & set("wax+")) or (mode is None and keyword):
            return f".open(mode={mode or '<not a literal>'})"
        return None
    if owner not in ("os", "shutil", "tempfile") and func.attr in _WRITING_METHODS:
        return f".{func.attr}(...)"
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, module: str, constants: dict[str, ast.expr]) -> None:
        self.module = module
        self.constants = constants
        self.stack: list[str] = []
        self.sites: list[WriteSite] = []

    def _visit_scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_FunctionDef = _visit_scope
    visit_AsyncFunctionDef = _visit_scope
    visit_ClassDef = _visit_scope

    def visit_Call(self, node: ast.Call) -> None:
        what = _classify(node, self.constants)
        if what is not None:
            function = ".".join(self.stack) if self.stack else "<module>"
            self.sites.append(WriteSite(self.module, function, node.lineno, what))
        self.generic_visit(node)


def scan_source(source: str, module: str) -> list[WriteSite]:
    """Every call in ``source`` that opens a file for writing or changes the directory tree."""
    tree = ast.parse(source)
    constants = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    scanner = _Scanner(module, constants)
    scanner.visit(tree)
    return scanner.sites


def _modules(package_dir: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        yield ".".join(parts), path


def unreviewed_write_sites(package_dir: Path | None = None) -> list[WriteSite]:
    """Write sites in the package outside ``ALLOWED_WRITE_SITES``."""
    if package_dir is None:
        package_dir = Path(__file__).resolve().parent.parent  # rune/, without importing it
    found: list[WriteSite] = []
    for module, path in _modules(package_dir):
        for site in scan_source(path.read_text(encoding="utf-8"), module):
            if (site.module, site.function) not in ALLOWED_WRITE_SITES:
                found.append(site)
    return found
