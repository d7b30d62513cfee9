"""The built-in tools. Each is a spec plus either ``run`` (read-only) or ``prepare``/``apply``."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rune.errors import ToolError
from rune.tools import fs
from rune.tools.sandbox import SandboxPolicy, validate_read_path, validate_write_path
from rune.tools.spec import PreparedChange, ToolSpec

MAX_READ_BYTES = 256 * 1024
DEFAULT_READ_LINES = 2000


@dataclass(frozen=True)
class ToolContext:
    policy: SandboxPolicy
    workspace: Path


@dataclass(frozen=True)
class BuiltinTool:
    spec: ToolSpec
    run: Callable[[ToolContext, Mapping[str, Any]], str] | None = None
    prepare: Callable[[ToolContext, Mapping[str, Any]], PreparedChange] | None = None
    apply: Callable[[ToolContext, PreparedChange], str] | None = None


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _integer(description: str) -> dict[str, Any]:
    return {"type": "integer", "description": description}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


# --- read_file -------------------------------------------------------------------------------


def read_file(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    path = validate_read_path(args["path"], ctx.policy, ctx.workspace)
    data, truncated, size = fs.read_regular_file(path, MAX_READ_BYTES)
    if b"\0" in data[:8192]:
        return f"{path} is a binary file ({size} bytes); not shown."
    lines = data.decode("utf-8", errors="replace").splitlines()
    offset = max(int(args.get("offset", 1)), 1)
    limit = max(int(args.get("limit", DEFAULT_READ_LINES)), 1)
    chosen = lines[offset - 1 : offset - 1 + limit]
    body = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(chosen, start=offset))
    notes = []
    if offset - 1 + limit < len(lines):
        notes.append(
            f"[showing lines {offset}-{offset + len(chosen) - 1} of {len(lines)}; "
            f"use offset={offset + len(chosen)} to read on]"
        )
    if truncated:
        notes.append(f"[file is {size} bytes; only the first {MAX_READ_BYTES} were read]")
    if not lines:
        return f"{path} is empty."
    return "\n".join([body, *notes])


# --- write_file ------------------------------------------------------------------------------


def unified_diff(path: Path, before: str | None, after: str) -> str:
    old = [] if before is None else before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    diff = difflib.unified_diff(
        old, new, fromfile="/dev/null" if before is None else f"a{path}", tofile=f"b{path}"
    )
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff
    )
    return text or f"(no change to {path})\n"


def _current_text(ctx: ToolContext, path: Path) -> tuple[str | None, str | None]:
    """The file's text and digest as it is now (None, None when it does not exist)."""
    digest = fs.current_digest(path, ctx.policy.write_roots)
    if digest is None:
        return None, None
    data, truncated, _ = fs.read_regular_file(path, 16 * MAX_READ_BYTES)
    if truncated:
        raise ToolError(f"{path} is too large to edit safely here.")
    return data.decode("utf-8", errors="surrogateescape"), digest


def prepare_file_change(
    ctx: ToolContext,
    tool: str,
    args: Mapping[str, Any],
    path: Path,
    before: str | None,
    digest: str | None,
    after: str,
) -> PreparedChange:
    verb = "create" if before is None else "modify"
    return PreparedChange(
        tool=tool,
        arguments=args,
        summary=f"{tool}: {verb} {path}",
        preview=unified_diff(path, before, after),
        fingerprint={"path": str(path), "sha256": digest},
    )


def write_file_prepare(ctx: ToolContext, args: Mapping[str, Any]) -> PreparedChange:
    path = validate_write_path(args["path"], ctx.policy, ctx.workspace)
    before, digest = _current_text(ctx, path)
    return prepare_file_change(ctx, "write_file", args, path, before, digest, args["content"])


def write_file_new_text(ctx: ToolContext, args: Mapping[str, Any], before: str | None) -> str:
    return str(args["content"])


def apply_file_change(
    ctx: ToolContext,
    change: PreparedChange,
    prepare: Callable[[ToolContext, Mapping[str, Any]], PreparedChange],
    new_text: Callable[[ToolContext, Mapping[str, Any], str | None], str],
) -> str:
    """Re-validate and re-prepare; write only if the result is exactly what was approved."""
    fresh = prepare(ctx, change.arguments)
    if fresh.fingerprint != change.fingerprint or fresh.preview != change.preview:
        raise ToolError(
            f"{change.fingerprint.get('path')} changed since this change was prepared; "
            "nothing was written. Read it again and prepare a new change."
        )
    path = validate_write_path(fresh.fingerprint["path"], ctx.policy, ctx.workspace)
    before, _ = _current_text(ctx, path)
    data = new_text(ctx, change.arguments, before).encode("utf-8", errors="surrogateescape")
    fs.atomic_write(path, data, ctx.policy.write_roots, expected_digest=fresh.fingerprint["sha256"])
    return f"wrote {path} ({len(data)} bytes)"


def write_file_apply(ctx: ToolContext, change: PreparedChange) -> str:
    return apply_file_change(ctx, change, write_file_prepare, write_file_new_text)


BUILTIN_TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        ToolSpec(
            "read_file",
            "Read a text file. Lines come numbered; use offset/limit for long files.",
            _object(
                {
                    "path": _string("File path, absolute or relative to the workspace."),
                    "offset": _integer("First line to show (1-based). Default 1."),
                    "limit": _integer(f"How many lines to show. Default {DEFAULT_READ_LINES}."),
                },
                ["path"],
            ),
        ),
        run=read_file,
    ),
    BuiltinTool(
        ToolSpec(
            "write_file",
            "Create or overwrite a file with the given content. Needs the user's approval.",
            _object(
                {
                    "path": _string("File path, absolute or relative to the workspace."),
                    "content": _string("The complete new content of the file."),
                },
                ["path", "content"],
            ),
            mutating=True,
        ),
        prepare=write_file_prepare,
        apply=write_file_apply,
    ),
)
