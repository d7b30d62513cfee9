"""Dependencies point one way: types ← transports/tools ← runtime ← operator ← app ← cli/tui,
and no two modules import each other, directly or round a longer loop.

The house is drawn by its folders: a module's package decides its layer (the top-level modules
of src/rune/ are the types floor, every other floor is a folder in ``LAYERS``), and an import
from a higher layer's package fails. Checked by parsing every import in src/rune
(function-level imports included), so a lazy import cannot sneak a dependency backwards.
``from rune import cli`` is an import of the module ``rune.cli``, not of the package root: each
name imported from a package is resolved to the submodule of that name when there is one, and a
name the root re-exports lazily (``from rune import LocalToolRuntime``) to the module it comes
from; ``import rune`` itself takes every re-export, so it counts as the top floor. The checks
are functions of a source tree, so a test can run them on a copy with a bad import planted in
it, or on a small tree of its own.

``python tests/test_architecture.py [SRC]`` prints the house: its floors, the longest chain of
imports, and any import running back up.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "rune"

# The floor of each package (docs/architecture.md shows this table; tests/test_docs.py checks it).
LAYERS: dict[str, int] = {
    "rune": 0,  # the modules at the top of src/rune/: types, errors, events, small helpers
    "rune.transport": 1,
    "rune.tools": 1,
    "rune.formats": 1,
    "rune.models": 1,
    "rune.settings": 1,
    "rune.pause": 1,
    "rune.runtime": 2,
    "rune.assists": 2,
    "rune.operator": 3,
    "rune.sessions": 3,
    "rune.app": 4,
    "rune.frontend": 5,
    "rune.cli": 6,
    "rune.tui": 6,
    "rune.acp": 6,
}
# ``import rune`` (the root with every lazy re-export) sits above every floor.
ROOT_WHOLE = "rune"
TOP = max(LAYERS.values()) + 1
# Paths the first design notes and CI name, kept at the top as re-exports of their new homes
# (and ``python -m rune.canary``); no module of Rune imports them.
KEPT_PATHS = {"rune.local_tool_runtime", "rune.tool_executor", "rune.canary"}
# The edges may not reach past the composition root into concrete parts.
EDGE_FORBIDDEN = ("rune.transport", "rune.tools", "rune.models.embedded")
HEAVY = ("httpx", "pydantic", "textual", "rich", "platformdirs", "mcp", "acp")


def package_of(module: str, root: Path = SRC) -> str:
    """The package that decides ``module``'s floor: ``rune.X`` when src/rune/X/ is a folder,
    else ``rune`` (a module at the top)."""
    parts = module.split(".")
    if len(parts) > 1 and (root / parts[1]).is_dir():
        return ".".join(parts[:2])
    return "rune"


def layer(module: str, root: Path = SRC) -> int:
    if module == ROOT_WHOLE:
        return TOP
    return LAYERS[package_of(module, root)]


def module_name(path: Path, root: Path = SRC) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = SRC) -> dict[str, Path]:
    """Every module of the package at ``root``, by name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def lazy_exports(root: Path = SRC) -> dict[str, str]:
    """The names the package root re-exports lazily, each with the module it comes from."""
    tree = ast.parse((root / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict):
            return {
                ast.literal_eval(k): ast.literal_eval(v)
                for k, v in zip(node.value.keys, node.value.values, strict=True)
                if k is not None
            }
    return {}


def rune_imports(path: Path, root: Path = SRC) -> set[str]:
    """The rune modules ``path`` imports, each resolved to the module itself (``rune`` alone
    stands for ``import rune``, the root with every re-export)."""
    known = modules(root)
    exports = lazy_exports(root)
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "rune")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "rune":
                continue
            for alias in node.names:
                # `from rune import cli` imports the module rune.cli; `from rune.x import name`
                # imports rune.x, whatever name is; `from rune import LocalToolRuntime` imports
                # the module the root re-exports it from; `from rune import __version__` takes
                # a constant the root itself defines.
                submodule = f"{target}.{alias.name}"
                if submodule in known:
                    found.add(submodule)
                elif target == "rune":
                    found.update({exports[alias.name]} if alias.name in exports else set())
                else:
                    found.add(target)
    return found


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Who imports whom. The package root and the kept paths are left out: they re-export."""
    graph = {name: rune_imports(path, root) for name, path in modules(root).items()}
    for name in ("rune", *KEPT_PATHS):
        graph.pop(name, None)
    return graph


def layer_violations(root: Path = SRC) -> list[str]:
    found = []
    for here, targets in sorted(import_graph(root).items()):
        backwards = sorted(t for t in targets if layer(t, root) > layer(here, root))
        if backwards:
            found.append(f"{here} (layer {layer(here, root)}) imports higher layers: {backwards}")
    return found


def import_cycles(root: Path = SRC) -> list[list[str]]:
    """The groups of modules that import one another (Tarjan's strongly connected components
    with more than one module, or a module importing itself)."""
    graph = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def longest_chain(root: Path = SRC) -> list[str]:
    """The longest path of imports (the house's height in storeys of modules)."""
    graph = import_graph(root)
    memo: dict[str, list[str]] = {}

    def chain(node: str) -> list[str]:
        if node not in memo:
            memo[node] = []  # a cycle, if any, ends the chain here (import_cycles reports it)
            below = [chain(t) for t in sorted(graph.get(node, ())) if t in graph]
            memo[node] = [node, *max(below, key=len, default=[])]
        return memo[node]

    return max((chain(n) for n in sorted(graph)), key=len, default=[])


def house(root: Path = SRC) -> str:
    """The floors with their packages and module counts, the longest chain, the upward arrows."""
    floors: dict[int, dict[str, int]] = {}
    for name in modules(root):
        if name in ("rune", *KEPT_PATHS):
            continue
        package = package_of(name, root)
        floor = LAYERS.get(package, -1)
        floors.setdefault(floor, {}).setdefault(package, 0)
        floors[floor][package] += 1
    lines = []
    for floor in sorted(floors, reverse=True):
        packages = ", ".join(f"{p} ({n})" for p, n in sorted(floors[floor].items()))
        lines.append(f"floor {floor if floor >= 0 else '?'}: {packages}")
    chain = longest_chain(root)
    lines.append(f"longest chain of imports: {len(chain)} modules: {' -> '.join(chain)}")
    upward = layer_violations(root)
    lines.append(f"imports running back up: {len(upward)}")
    lines += [f"  {v}" for v in upward]
    return "\n".join(lines)


MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_one_way(path: Path) -> None:
    here = module_name(path)
    if here == "rune" or here in KEPT_PATHS:
        return  # the package root and the kept paths re-export
    backwards = sorted(t for t in rune_imports(path) if layer(t) > layer(here))
    assert not backwards, f"{here} (layer {layer(here)}) imports higher layers: {backwards}"


def test_no_two_modules_import_each_other() -> None:
    assert import_cycles() == []


@pytest.mark.parametrize(
    "path",
    [p for p in MODULES if module_name(p).startswith(("rune.cli", "rune.tui", "rune.acp"))],
    ids=lambda p: module_name(p),
)
def test_cli_and_tui_only_reach_concrete_parts_through_the_app(path: Path) -> None:
    direct = sorted(t for t in rune_imports(path) if t.startswith(EDGE_FORBIDDEN))
    assert not direct, f"{module_name(path)} builds concrete parts itself: {direct}"


def test_the_tui_does_not_import_the_cli() -> None:
    tui = {name: targets for name, targets in import_graph().items() if name.startswith("rune.tui")}
    reaching = {
        name for name, targets in tui.items() if any(t.startswith("rune.cli") for t in targets)
    }
    assert not reaching


def test_every_folder_has_a_floor() -> None:
    folders = {f"rune.{p.parent.name}" for p in SRC.glob("*/__init__.py")}
    assert folders == LAYERS.keys() - {"rune"}


def test_the_kept_paths_only_re_export_and_nothing_imports_them() -> None:
    for name in KEPT_PATHS:
        tree = ast.parse(modules()[name].read_text())
        for node in tree.body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            main_guard = isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
            assert docstring or main_guard or isinstance(node, ast.ImportFrom), (name, node)
    importers = {n: sorted(t & KEPT_PATHS) for n, t in import_graph().items() if t & KEPT_PATHS}
    assert importers == {}


def test_the_kept_paths_still_import() -> None:
    import rune.canary
    import rune.local_tool_runtime
    import rune.tool_executor

    assert rune.local_tool_runtime.LocalToolRuntime.__module__ == "rune.runtime.local_tool_runtime"
    assert rune.tool_executor.ToolExecutor.__module__ == "rune.tools.executor"
    assert callable(rune.tool_executor.validate_write_path)
    assert callable(rune.canary.main)


# Where the parts meet, signatures say what they take: no ``Any`` in the parameters or returns
# of the composition root, the CLI drive and the operator (mypy --strict checks the rest).
TYPED_SEAMS = ("app", "cli/driving.py", "cli/commands", "operator")


def any_in_signatures(source: str) -> list[str]:
    """``line name: annotation`` for each parameter or return annotated with ``Any``
    (``typing.Any`` and quoted annotations included)."""

    def has_any(annotation: ast.expr) -> bool:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            annotation = ast.parse(annotation.value, mode="eval").body
        return any(
            (isinstance(n, ast.Name) and n.id == "Any")
            or (isinstance(n, ast.Attribute) and n.attr == "Any")
            or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "Any" in n.value)
            for n in ast.walk(annotation)
        )

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            annotations = [p.annotation for p in params if p is not None] + [node.returns]
            found += [
                f"{node.lineno} {node.name}: {ast.unparse(annotation)}"
                for annotation in annotations
                if annotation is not None and has_any(annotation)
            ]
    return found


SEAM_MODULES = [
    p
    for seam in TYPED_SEAMS
    for p in (sorted((SRC / seam).rglob("*.py")) if (SRC / seam).is_dir() else [SRC / seam])
]


@pytest.mark.parametrize("path", SEAM_MODULES, ids=lambda p: module_name(p))
def test_no_any_in_the_signatures_where_the_parts_meet(path: Path) -> None:
    assert any_in_signatures(path.read_text()) == []


def test_the_any_check_sees_any_wherever_a_signature_holds_it() -> None:
    source = (
        "import typing\n"
        "from typing import Any\n"
        "def a(x: dict[str, Any]) -> None: ...\n"
        "async def b() -> 'list[Any]': ...\n"
        "def c(*args: typing.Any, **kw: object) -> None: ...\n"
        "def d(x: object, y: 'Mapping[str, object]') -> int | None:\n"
        "    z: Any = x\n"  # inside a body, not a signature
        "    return None\n"
    )
    assert any_in_signatures(source) == [
        "3 a: dict[str, Any]",
        "4 b: 'list[Any]'",
        "5 c: typing.Any",
    ]


# Small modules with one job (issue 24): the loop's runner in at most 300 lines with no
# protocol branch, and no module of the trunk's packages over 400.
SMALL_PACKAGES = ("runtime", "assists", "app", "cli")


@pytest.mark.parametrize(
    "path",
    [p for package in SMALL_PACKAGES for p in sorted((SRC / package).rglob("*.py"))],
    ids=lambda p: module_name(p),
)
def test_the_trunk_s_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= 400, f"{module_name(path)}: {lines} lines"


def test_the_runner_is_small_and_knows_no_protocol() -> None:
    source = (SRC / "runtime" / "runner.py").read_text()
    assert len(source.splitlines()) <= 300
    assert "protocol ==" not in source


def test_importing_rune_and_its_cli_loads_nothing_heavy() -> None:
    code = (
        "import sys, rune, rune.cli; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout


# --- the checks catch what they are for: planted in a copy of the source --------------------


@pytest.fixture
def copy_of_src(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "rune"
    shutil.copytree(SRC, root, ignore=shutil.ignore_patterns("__pycache__"))
    yield root


def plant(root: Path, module: str, line: str) -> None:
    path = root.joinpath(*module.split(".")[1:]).with_suffix(".py")
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_copy_is_clean(copy_of_src: Path) -> None:
    assert layer_violations(copy_of_src) == []
    assert import_cycles(copy_of_src) == []


@pytest.mark.parametrize(
    "line",
    ["from rune import cli", "from rune import app, cli", "import rune.cli", "from . import cli"],
)
def test_a_planted_import_of_the_cli_in_messages_fails(copy_of_src: Path, line: str) -> None:
    plant(copy_of_src, "rune.messages", line)
    [violation] = layer_violations(copy_of_src)
    assert violation.startswith("rune.messages (layer 0) imports higher layers:")
    assert "'rune.cli'" in violation


def test_a_planted_cycle_within_a_layer_fails(copy_of_src: Path) -> None:
    # rune.pause.state imports rune.pause.seal; both sit in one package, so only the cycle
    # check can see it.
    plant(copy_of_src, "rune.pause.seal", "from rune.pause import state")
    assert layer_violations(copy_of_src) == []
    assert import_cycles(copy_of_src) == [["rune.pause.seal", "rune.pause.state"]]


def test_main_s_two_upward_imports_fail(copy_of_src: Path) -> None:
    # Before the move, tool_executor.py sat at the top (the types floor) and imported tools/,
    # and tools/write_sites.py imported the package root to find its folder.
    shutil.copy(copy_of_src / "tools" / "executor.py", copy_of_src / "executor_at_top.py")
    plant(copy_of_src, "rune.tools.write_sites", "import rune")
    violations = layer_violations(copy_of_src)
    assert len(violations) == 2, violations
    assert violations[0].startswith("rune.executor_at_top (layer 0) imports higher layers:")
    assert "'rune.tools.builtin'" in violations[0]
    assert violations[1] == "rune.tools.write_sites (layer 1) imports higher layers: ['rune']"


def test_a_lazy_re_export_of_the_root_counts_as_its_module(copy_of_src: Path) -> None:
    plant(copy_of_src, "rune.tools.base", "from rune import LocalToolRuntime, __version__")
    assert layer_violations(copy_of_src) == [
        "rune.tools.base (layer 1) imports higher layers: ['rune.runtime.local_tool_runtime']"
    ]


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "rune" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "rune"


@pytest.mark.parametrize("upward", [True, False])
def test_the_folder_rule_on_a_small_tree(tmp_path: Path, upward: bool) -> None:
    # A tree of its own: the top (types), tools/ (floor 1) and runtime/ (floor 2). Only the
    # import from tools/ up into runtime/ breaks the rule; runtime/ importing tools/ is fine.
    tool = "from rune.runtime.loop import run\n" if upward else "from rune.errors import Bad\n"
    root = _tree(
        tmp_path,
        {
            "__init__.py": "_EXPORTS: dict[str, str] = {}\n",
            "errors.py": "class Bad(Exception): ...\n",
            "tools/__init__.py": "",
            "tools/edit.py": tool,
            "runtime/__init__.py": "",
            "runtime/loop.py": "from rune.tools import edit\ndef run() -> None: ...\n",
        },
    )
    expected = ["rune.tools.edit (layer 1) imports higher layers: ['rune.runtime.loop']"]
    assert layer_violations(root) == (expected if upward else [])
    assert [package_of(m, root) for m in sorted(modules(root))] == [
        "rune",
        "rune",
        "rune.runtime",
        "rune.runtime",
        "rune.tools",
        "rune.tools",
    ]


def test_a_transport_wrapper_is_exactly_a_transport() -> None:
    # What callers use is declared by the Transport protocol; a wrapper forwards nothing
    # else unseen (issue 24: no __getattr__ forwarding).
    from rune.transport.base import Transport, TransportWrapper
    from rune.transport.scripted import ScriptedTransport
    from rune.transport.watch import WatchedTransport

    wrapped = WatchedTransport(ScriptedTransport([]))
    assert isinstance(wrapped, Transport)
    assert not hasattr(wrapped, "requests") and hasattr(wrapped.inner, "requests")
    assert "__getattr__" not in vars(TransportWrapper)


if __name__ == "__main__":
    print(house(Path(sys.argv[1]) if len(sys.argv) > 1 else SRC))
