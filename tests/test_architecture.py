"""Dependencies point one way: types ← transports/tools ← runtime ← operator ← app ← cli/tui.

Checked by parsing every import in src/rune (function-level imports included), so a lazy
import cannot sneak a dependency backwards.
"""

from __future__ import annotations

import ast
import subprocess
import sys
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
    "rune.transport": 1,
    "rune.tools": 1,
    "rune.tool_executor": 1,
    "rune.fallback": 1,
    "rune.constrained": 1,
    "rune.catalog": 1,
    "rune.pull": 1,
    "rune.embedded": 1,
    "rune.config": 1,
    "rune.seal": 1,
    "rune.local_tool_runtime": 2,
    "rune.operator": 3,
    "rune.sessions": 3,
    "rune.app": 4,
    "rune.demo": 4,
    "rune.canary": 4,
    "rune.cli": 5,
    "rune.tui": 5,
}
# The edges may not reach past the composition root into concrete parts.
EDGE_FORBIDDEN = ("rune.transport", "rune.tools", "rune.tool_executor", "rune.embedded")
HEAVY = ("httpx", "pydantic", "textual", "rich", "platformdirs", "mcp")


def layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def rune_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
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
            if target.split(".")[0] == "rune":
                found.add(target)
    return found


MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_one_way(path: Path) -> None:
    here = module_name(path)
    if here == "rune":
        return  # the package root re-exports lazily by name
    backwards = sorted(t for t in rune_imports(path) if t != "rune" and layer(t) > layer(here))
    assert not backwards, f"{here} (layer {layer(here)}) imports higher layers: {backwards}"


@pytest.mark.parametrize(
    "path",
    [p for p in MODULES if module_name(p).startswith(("rune.cli", "rune.tui"))],
    ids=lambda p: module_name(p),
)
def test_cli_and_tui_only_reach_concrete_parts_through_the_app(path: Path) -> None:
    direct = sorted(t for t in rune_imports(path) if t.startswith(EDGE_FORBIDDEN))
    assert not direct, f"{module_name(path)} builds concrete parts itself: {direct}"


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
