"""Context blocks: the pieces of the system message, each with a bucket and an evictable flag.

A contributor returns one :class:`ContextBlock` (or None when it has nothing to say). The
budget renders the kept blocks into one system message, highest bucket first, and evicts the
lowest buckets first when the conversation does not fit. Nothing here depends on time or on
counters, so the same workspace gives the same bytes and the server's prompt cache holds.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rune.errors import RuneError
from rune.tools import fs
from rune.tools.sandbox import SandboxPolicy, validate_read_path
from rune.tools.spec import ToolSpec

SYSTEM_BUCKET = 100
TOOLS_BUCKET = 90
ENVIRONMENT_BUCKET = 70
PROJECT_BUCKET = 50

PROJECT_FILES = ("AGENTS.md", "RUNE.md")
PROJECT_FILE_CAP = 16 * 1024

TOOL_GUIDANCE = (
    "Use tools for every file/command action; never fabricate tool output.\n"
    "Read before editing; verify fixes by running them."
)

DEFAULT_SYSTEM_PROMPT = (
    "You are Rune, a coding agent working in the user's project. Be brief and exact. "
    "Changes to files wait for the user's approval."
)

#: the tool names that run shell commands; the environment block says whether they are contained
COMMAND_TOOLS = frozenset({"run_command", "run_shell", "bash", "shell"})


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """One part of the system message. ``bucket`` is its priority (higher stays longer)."""

    name: str
    text: str
    bucket: int
    evictable: bool

    @property
    def label(self) -> str:
        return f"{self.name} block (bucket {self.bucket})"


def system_block(prompt: str | None) -> ContextBlock:
    text = prompt if prompt is not None else DEFAULT_SYSTEM_PROMPT
    return ContextBlock("system", text.strip(), SYSTEM_BUCKET, evictable=False)


def tools_block(specs: Sequence[ToolSpec]) -> ContextBlock:
    """The tools by name and one-line description, then the guidance a tool model needs."""
    lines = ["Tools you can call:"]
    for spec in specs:
        first_line = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
        lines.append(f"- {spec.name}: {first_line}" if first_line else f"- {spec.name}")
    lines.append(TOOL_GUIDANCE)
    return ContextBlock("tools", "\n".join(lines), TOOLS_BUCKET, evictable=False)


@dataclass(frozen=True, slots=True)
class ProjectInstructions:
    block: ContextBlock | None
    warnings: tuple[str, ...] = ()


def project_block(workspace: Path, policy: SandboxPolicy) -> ProjectInstructions:
    """AGENTS.md and RUNE.md from the workspace, read as the read_file tool would read them."""
    sections: list[str] = []
    warnings: list[str] = []
    for name in PROJECT_FILES:
        candidate = workspace / name
        if not candidate.is_file() and not candidate.is_symlink():
            continue
        try:
            path = validate_read_path(candidate, policy, workspace)
            found = fs.read_regular_file(path, policy.read_roots, PROJECT_FILE_CAP)
        except RuneError as err:
            warnings.append(f"{name} was not read into the context: {err}")
            continue
        text = found.data.decode("utf-8", errors="replace").strip()
        if found.truncated:
            text += f"\n[{name} is {found.size} bytes; only the first {PROJECT_FILE_CAP} are shown]"
        sections.append(f"Project instructions from {name}:\n{text}")
    block = (
        ContextBlock("project", "\n\n".join(sections), PROJECT_BUCKET, evictable=True)
        if sections
        else None
    )
    return ProjectInstructions(block, tuple(warnings))


def environment_block(
    workspace: Path,
    policy: SandboxPolicy,
    specs: Sequence[ToolSpec],
    *,
    commands_contained: bool | None = None,
) -> ContextBlock:
    """Facts the model cannot see for itself: where it is and where it may read and write."""
    command_tools = sorted(spec.name for spec in specs if spec.name in COMMAND_TOOLS)
    if not command_tools:
        commands = "no command tool is available"
    elif commands_contained is True:
        commands = f"{', '.join(command_tools)} run contained by the sandbox (bubblewrap)"
    elif commands_contained is False:
        commands = f"{', '.join(command_tools)} run NOT contained, with the user's own rights"
    else:
        commands = f"{', '.join(command_tools)}: containment unknown"
    lines = [
        "Environment:",
        f"- Workspace (relative paths start here): {workspace}",
        f"- OS: {platform.system()} {platform.release()}",
        f"- You may read under: {', '.join(policy.describe_read_roots())}",
        f"- You may write (after approval) under: {', '.join(policy.describe_write_roots())}",
        f"- Commands: {commands}",
    ]
    return ContextBlock("environment", "\n".join(lines), ENVIRONMENT_BUCKET, evictable=True)


def render(blocks: Sequence[ContextBlock]) -> str:
    """The system message text: highest bucket first, a stable order for the prompt cache."""
    ordered = sorted(blocks, key=lambda b: -b.bucket)
    return "\n\n".join(b.text for b in ordered if b.text)
