"""The design lives in docs/: what cites it finds it, and the names it keeps stay importable."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"

# Text that cites documents: the code, the benchmark, the scripts, the README and docs itself.
CITING = [
    *(REPO / "src").rglob("*.py"),
    *(REPO / "bench").rglob("*.py"),
    *(REPO / "bench").rglob("*.md"),
    *(p for p in (REPO / "scripts").iterdir() if p.is_file()),
    REPO / "README.md",
    *DOCS.glob("*.md"),
]
DOCS_PATH = re.compile(r"\bdocs/([\w-]+\.md)\b")
# docs/ files link each other by bare name: [loop.md](loop.md), "wire.md has the shapes"; a
# name inside a longer one (`.github/copilot-instructions.md`, in sandbox.md's lists) is not one.
SIBLING = re.compile(r"(?<![\w./-])([a-z]+\.md)\b")

# Documents that were never in the repository; their names are split so this file does not
# cite them either.
NOT_IN_THE_REPO = [
    "design" + " document",
    "P0" + "-05",
    "ollama" + "-wire.md",
    "sandbox" + "-security.md",
    "code-running" + "-paths.md",
]

# The public names code built on Rune imports (docs/loop.md, "Names that stay").
KEPT_NAMES = {
    "rune": [
        "LocalToolRuntime",
        "OperatorResponse",
        "ToolRequest",
        "ToolEvent",
        "PendingApproval",
        "ChatResult",
        "RuneOperator",
        "ToolExecutor",
        "SandboxPolicy",
        "Transport",
        "OllamaChatTransport",
        "OpenAICompatTransport",
        "ScriptedTransport",
        "ToolSpec",
        "PreparedChange",
        "Capabilities",
        "SessionStore",
        "RuneError",
    ],
    "rune.tools.executor": ["validate_write_path", "validate_read_path"],
}


def test_the_design_is_written_down() -> None:
    for name in ("README.md", "loop.md", "protocols.md", "sandbox.md", "wire.md"):
        assert (DOCS / name).is_file(), name


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO))


def test_every_cited_docs_file_exists() -> None:
    missing = []
    for path in CITING:
        text = path.read_text(encoding="utf-8")
        cited = set(DOCS_PATH.findall(text))
        if path.parent == DOCS:
            cited |= set(SIBLING.findall(text))
        missing += [f"{_relative(path)}: {n}" for n in sorted(cited) if not (DOCS / n).is_file()]
    assert missing == []


def test_nothing_cites_a_document_that_is_not_in_the_repo() -> None:
    found = [
        f"{_relative(path)}: {cited}"
        for path in [*CITING, *(REPO / "tests").rglob("*.py")]
        for cited in NOT_IN_THE_REPO
        if cited in path.read_text(encoding="utf-8")
    ]
    assert found == []


def test_the_kept_names_are_importable_where_docs_says() -> None:
    loop_md = (DOCS / "loop.md").read_text(encoding="utf-8")
    for module, names in KEPT_NAMES.items():
        imported = importlib.import_module(module)
        for name in names:
            assert hasattr(imported, name), f"{module}.{name}"
            assert f"`{name}`" in loop_md, f"docs/loop.md does not list {name}"


def test_the_docs_say_what_a_project_file_may_set_as_the_settings_declare_it() -> None:
    from rune.settings.keys import project_file_rule

    text = " ".join((DOCS / "using.md").read_text(encoding="utf-8").split())
    assert project_file_rule() in text


def _floor_table() -> dict[str, int]:
    """The floors docs/architecture.md shows: its table's rows ``| 2 | `rune.runtime` | ... |``."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| `(rune(?:\.\w+)?)` \| .+ \|$", text, flags=re.MULTILINE)
    return {package: int(floor) for floor, package in rows}


def test_the_architecture_doc_shows_the_floors_the_architecture_test_enforces() -> None:
    from test_architecture import LAYERS

    assert _floor_table() == LAYERS


def test_the_loop_has_one_diagram_and_the_docs_that_describe_the_loop_link_it() -> None:
    # A diagram of the loop: a tree line (└─) naming the loop's while True.
    drawn = [
        _relative(path)
        for path in [*CITING, *(REPO / "src").rglob("*.py")]
        if any("└─" in line and "while True" in line for line in path.read_text().splitlines())
    ]
    assert sorted(set(drawn)) == ["docs/loop.md"]
    for name in ("architecture.md", "using.md", "protocols.md", "json.md", "mcp.md"):
        assert "loop.md" in (DOCS / name).read_text(encoding="utf-8"), name
    assert "docs/loop.md" in (REPO / "README.md").read_text(encoding="utf-8")
