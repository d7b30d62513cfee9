"""Dependencies point one way: types ← transports/tools ← runtime ← operator ← app ← cli/tui,
and no two modules import each other, directly or round a longer loop.

Checked by parsing every import in src/rune (function-level imports included), so a lazy
import cannot sneak a dependency backwards. ``from rune import cli`` is an import of the module
``rune.cli``, not of the package root: each name imported from a package is resolved to the
submodule of that name when there is one. The checks are functions of a source tree, so a test
can run them on a copy with a bad import planted in it.
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

# The lowest layer a module may sit in, by module-name prefix (longest prefix wins).
LAYERS: dict[str, int] = {
    "rune": 0,
    "rune.errors": 0,
    "rune.messages": 0,
    "rune.events": 0,
    "rune.paths": 0,
    "rune.distribution": 0,
    "rune.text": 0,
    "rune.limits": 0,
    "rune.keys": 0,
    "rune.calls": 0,
    "rune.stop": 0,
    "rune.outcome": 0,
    "rune.grants": 0,
    "rune.transport": 1,
    "rune.tools": 1,
    "rune.tool_executor": 1,
    "rune.fallback": 1,
    "rune.constrained": 1,
    "rune.catalog": 1,
    "rune.pull": 1,
    "rune.embedded": 1,
    "rune.prompt_cache": 1,
    "rune.config": 1,
    "rune.seal": 1,
    "rune.state": 1,
    "rune.local_tool_runtime": 2,
    "rune.runtime": 2,
    "rune.assists": 2,
    "rune.repair": 2,
    "rune.operator": 3,
    "rune.sessions": 3,
    "rune.app": 4,
    "rune.demo": 4,
    "rune.canary": 4,
    "rune.model_check": 4,
    "rune.view": 5,
    "rune.approvals": 5,
    "rune.cli": 6,
    "rune.tui": 6,
    "rune.acp": 6,
}
# The edges may not reach past the composition root into concrete parts.
EDGE_FORBIDDEN = ("rune.transport", "rune.tools", "rune.tool_executor", "rune.embedded")
HEAVY = ("httpx", "pydantic", "textual", "rich", "platformdirs", "mcp", "acp")


def layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def module_name(path: Path, root: Path = SRC) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = SRC) -> dict[str, Path]:
    """Every module of the package at ``root``, by name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def rune_imports(path: Path, root: Path = SRC) -> set[str]:
    """The rune modules ``path`` imports, each resolved to the module itself."""
    known = modules(root)
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
            # `from rune import cli` imports the module rune.cli; `from rune.x import name`
            # imports rune.x, whatever name is.
            submodules = {f"{target}.{a.name}" for a in node.names} & known.keys()
            found.update(submodules or {target})
            if len(submodules) < len(node.names):
                found.add(target)
    return found


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Who imports whom. The package root is left out: it re-exports lazily, by name."""
    graph = {name: rune_imports(path, root) - {"rune"} for name, path in modules(root).items()}
    graph.pop("rune", None)
    return graph


def layer_violations(root: Path = SRC) -> list[str]:
    found = []
    for here, targets in sorted(import_graph(root).items()):
        backwards = sorted(t for t in targets if layer(t) > layer(here))
        if backwards:
            found.append(f"{here} (layer {layer(here)}) imports higher layers: {backwards}")
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


MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_one_way(path: Path) -> None:
    here = module_name(path)
    if here == "rune":
        return  # the package root re-exports lazily by name
    backwards = sorted(t for t in rune_imports(path) if t != "rune" and layer(t) > layer(here))
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


def test_the_layer_table_knows_every_module() -> None:
    unknown = [
        module_name(p)
        for p in MODULES
        if layer(module_name(p)) == 0 and module_name(p) not in LAYERS
    ]
    assert not unknown, f"add these modules to LAYERS: {unknown}"


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
    # rune.state imports rune.seal; both sit in layer 1, so only the cycle check can see it.
    plant(copy_of_src, "rune.seal", "from rune import state")
    assert layer_violations(copy_of_src) == []
    assert import_cycles(copy_of_src) == [["rune.seal", "rune.state"]]


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
