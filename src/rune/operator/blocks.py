"""Context blocks: the pieces of the system message, each with a bucket and an evictable flag.

A contributor returns one :class:`ContextBlock` (or None when it has nothing to say). The
budget renders the kept blocks into one system message, highest bucket first (the blocks that
are never evicted, then the runtime's protocol prompt, then the workspace's evictable blocks),
and evicts the lowest buckets first when the conversation does not fit. Nothing here depends
on time or on counters, so the same workspace gives the same bytes and the server's prompt
cache holds.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol, runtime_checkable

from rune.errors import RuneError
from rune.text import fenced
from rune.tools import fs
from rune.tools.sandbox import SandboxPolicy, validate_read_path
from rune.tools.spec import ToolSpec

SYSTEM_BUCKET = 100
TOOLS_BUCKET = 90
ENVIRONMENT_BUCKET = 70
FILES_BUCKET = 60
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


@runtime_checkable
class Confined(Protocol):
    """A tool set confined to a workspace by a sandbox policy (``ToolExecutor`` and the
    executor that adds MCP tools to it)."""

    @property
    def workspace(self) -> Path: ...

    @property
    def policy(self) -> SandboxPolicy: ...

    def commands_contained(self) -> bool: ...


@dataclass(frozen=True)
class Workspace:
    """Where the tools work and what they may touch: what the workspace's blocks describe.

    ``contained`` says whether commands run contained by the sandbox; it is asked once, the
    first time a block needs it (whether bubblewrap works does not change mid-session)."""

    root: Path
    policy: SandboxPolicy
    contained: Callable[[], bool] | None = None

    @classmethod
    def of(cls, tools: object) -> Workspace | None:
        """The workspace ``tools`` is confined to; None for tools that have none."""
        if isinstance(tools, Confined):
            return cls(tools.workspace, tools.policy, tools.commands_contained)
        return None

    @cached_property
    def commands_contained(self) -> bool | None:
        return self.contained() if self.contained is not None else None


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


def tools_block(specs: Sequence[ToolSpec], *, described_below: bool = False) -> ContextBlock:
    """The tools by name and one-line description, then the guidance a tool model needs.

    ``described_below``: the protocol's own prompt follows with every tool's arguments and
    description (the constrained protocol), so the names alone are listed here: a small model
    reads about 80 prompt tokens a second, and the same list twice costs it seconds.
    """
    lines = ["Tools you can call:"]
    if described_below:
        lines[0] += f" {', '.join(spec.name for spec in specs)} (described below)."
    for spec in () if described_below else specs:
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


#: A workspace this small goes into the context whole; a bigger one, only the files the task
#: names. Tight on purpose: a small model on two cores reads about 80 prompt tokens a second.
SMALL_WORKSPACE_FILES = 8
SMALL_WORKSPACE_BYTES = 8 * 1024
NAMED_FILE_BYTES = 16 * 1024
NAMED_FILES_BYTES = 24 * 1024
NAMED_TEST_FILE_BYTES = 4 * 1024
#: at most this many files are looked at to decide whether the workspace is small
WALK_LIMIT = 64
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "venv", "build", "dist", "target"})
_FILE_MENTION = re.compile(r"[\w./-]*\w\.[A-Za-z0-9]{1,8}\b")
_TEST_ID = re.compile(r"([\w./-]*\w\.py)::")
_LANGUAGES = {".py": "python", ".js": "javascript", ".ts": "typescript", ".sh": "bash"}


def files_block(workspace: Path, policy: SandboxPolicy, request: str) -> ContextBlock | None:
    """The workspace's files as they are now, so a model can change them without reading them
    first (as Aider puts the files a user names into the chat): every text file of a small
    workspace, else the files ``request`` names. Read as read_file reads them (same policy),
    and evictable: it is the first thing to go when the window is short."""
    chosen: dict[str, bytes] = {}
    small = _small_workspace(workspace, policy)
    if small is not None:
        chosen.update(small)
    else:
        total = 0
        # A test named by its id (file::test) is shown by the test run's digest; its whole
        # file goes in only when small (a library's test file costs a small model a minute).
        with_ids = {m.group(1).strip("./") for m in _TEST_ID.finditer(request)}
        for name in _mentioned(request):
            limit = NAMED_TEST_FILE_BYTES if name in with_ids else NAMED_FILE_BYTES
            data = read_text_file(workspace, policy, name, limit)
            if data is None or total + len(data) > NAMED_FILES_BYTES:
                continue
            chosen[name] = data
            total += len(data)
    if not chosen:
        return None
    parts = [
        "Files in the workspace, as they are now (you need not read them again):",
        *(_fenced(name, data) for name, data in sorted(chosen.items())),
    ]
    return ContextBlock("files", "\n\n".join(parts), FILES_BUCKET, evictable=True)


def _fenced(name: str, data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    language = _LANGUAGES.get(Path(name).suffix, "")
    return f"{name}\n{fenced(text.rstrip(chr(10)), language)}"


def _mentioned(request: str) -> list[str]:
    names = []
    for match in _FILE_MENTION.finditer(request):
        name = match.group(0).strip("./") if not match.group(0).startswith("/") else match.group(0)
        if name and name not in names:
            names.append(name)
    return names


def read_text_file(workspace: Path, policy: SandboxPolicy, name: str, limit: int) -> bytes | None:
    """A text file's bytes if the read policy allows it and it is small enough, else None."""
    try:
        path = validate_read_path(workspace / name, policy, workspace)
        if not path.is_relative_to(workspace):
            return None
        found = fs.read_regular_file(path, policy.read_roots, limit)
    except (RuneError, OSError):
        return None
    if found.truncated or b"\0" in found.data:
        return None
    try:
        found.data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return found.data


def is_small_workspace(workspace: Path, policy: SandboxPolicy) -> bool:
    """Whether the workspace goes into the context whole (:func:`files_block`)."""
    return _small_workspace(workspace, policy) is not None


def _small_workspace(workspace: Path, policy: SandboxPolicy) -> dict[str, bytes] | None:
    """All text files of the workspace, when there are few and they are small; else None."""

    def skip_dir(path: Path) -> bool:
        return path.name.startswith(".") or path.name in SKIPPED_DIRS

    names: list[str] = []
    try:
        for _, path in fs.walk_files(workspace, policy.read_roots, skip_dir):
            if path.name.startswith("."):
                continue
            names.append(path.relative_to(workspace).as_posix())
            if len(names) > WALK_LIMIT:
                return None
    except (RuneError, OSError):
        return None
    found: dict[str, bytes] = {}
    total = 0
    for name in names:
        data = read_text_file(workspace, policy, name, SMALL_WORKSPACE_BYTES)
        if data is None:
            continue
        found[name] = data
        total += len(data)
        if len(found) > SMALL_WORKSPACE_FILES or total > SMALL_WORKSPACE_BYTES:
            return None
    return found


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
        f"- You may read under: {_roots(policy.describe_read_roots(), workspace)}",
        *_asked(policy),
        f"- You may write (after approval) under: "
        f"{_roots(policy.describe_write_roots(), workspace)}",
        f"- Commands: {commands}",
    ]
    return ContextBlock("environment", "\n".join(lines), ENVIRONMENT_BUCKET, evictable=True)


def _asked(policy: SandboxPolicy) -> list[str]:
    asked = policy.describe_ask_read_roots()
    if not asked:
        return []
    return [f"- Reading elsewhere under {', '.join(asked)} asks the user first, who may refuse"]


def _roots(roots: Sequence[str], workspace: Path) -> str:
    """The roots, the workspace by that name: its path, said once above, is the prompt's
    longest and costs a small model a second a mention to read."""
    return ", ".join("the workspace" if root == str(workspace) else root for root in roots)


def render(blocks: Sequence[ContextBlock]) -> str:
    """The system message text: highest bucket first, a stable order for the prompt cache."""
    ordered = sorted(blocks, key=lambda b: -b.bucket)
    return "\n\n".join(b.text for b in ordered if b.text)
