"""File tools: read_file and list_dir (read-only); write_file, edit_file and replace_function
(prepared changes).

The file-changing tools take text: content with a NUL or another control byte that no text
file holds is refused before anything is shown (:func:`check_text`), so a preview never has
to summarise content it cannot show.

A mutating file tool is a *plan* function: it validates the path through the write choke point
and computes the whole new content, touching nothing. ``prepare`` shows the plan as a diff;
``apply`` plans again, refuses unless the fresh plan has the approved fingerprint, and writes
it with ``fs.atomic_write`` (which validates once more and re-checks the digest). A plan that
would break a Python file is refused before anything is shown (:mod:`rune.tools.python_code`),
and the result of a write shows the model the lines as they now are.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rune.errors import NothingToChange, ToolError, ToolInputError
from rune.messages import thaw
from rune.tools import fs, python_code
from rune.tools.base import (
    PATH_ARG,
    Args,
    BuiltinTool,
    ToolContext,
    integer_arg,
    object_schema,
    string_arg,
)
from rune.tools.display import for_display, is_binary, relative_label, unified_diff
from rune.tools.locate import locate
from rune.tools.sandbox import sensitive_reason, validate_read_path, validate_write_path
from rune.tools.spec import PreparedChange, ToolSpec

MAX_READ_BYTES = 256 * 1024
MAX_EDIT_BYTES = 4 * 1024 * 1024
DEFAULT_READ_LINES = 2000
#: the fewest lines a read shows (but at the end of a file): the 1.5B paged through a docstring
#: two lines a turn, following "use offset=N to read on", until its turns ran out
MIN_READ_LINES = 40
MAX_LIST_ENTRIES = 500
#: how many changed lines a write's result shows back to the model
SHOWN_BACK_LINES = 30


# --- read-only -------------------------------------------------------------------------------


def read_file(ctx: ToolContext, args: Args) -> str:
    raw = str(args["path"])
    path = validate_read_path(raw, ctx.policy, ctx.workspace, file_target=True)
    moved = ""
    if not os.path.lexists(path):
        where = locate(ctx, raw)
        if where.unique is None:
            raise ToolError(f"{for_display(str(path))} does not exist.{where.hint()}")
        path = validate_read_path(where.unique, ctx.policy, ctx.workspace, file_target=True)
        moved = (
            f"[{for_display(raw)} does not exist; this is {for_display(where.unique)}, the one "
            "file in the workspace whose path ends so]\n"
        )
    found = fs.read_regular_file(path, ctx.policy.read_roots, MAX_READ_BYTES)
    shown = for_display(str(path))
    if is_binary(found.data):
        return f"{shown} is a binary file ({found.size} bytes); not shown."
    lines = found.data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return f"{shown} is empty."
    offset = int(args.get("offset", 1))
    limit = max(int(args.get("limit", DEFAULT_READ_LINES)), MIN_READ_LINES)
    if offset > len(lines):
        return f"{shown} has {len(lines)} lines; offset {offset} is past the end."
    chosen = lines[offset - 1 : offset - 1 + limit]
    body = "\n".join(
        f"{n:>6}\t{for_display(line, keep=chr(9))}" for n, line in enumerate(chosen, offset)
    )
    notes = []
    last = offset + len(chosen) - 1
    if last < len(lines):
        notes.append(
            f"[showing lines {offset}-{last} of {len(lines)}; use offset={last + 1} to read on]"
        )
    if found.truncated:
        notes.append(f"[file is {found.size} bytes; only the first {MAX_READ_BYTES} were read]")
    return moved + "\n".join([body, *notes])


def _describe(entry: fs.Entry) -> str:
    name = for_display(entry.name, keep="")
    if entry.kind == "dir":
        return f"{name}/"
    if entry.kind == "symlink":
        return f"{name} -> {for_display(entry.target or '', keep='')}  [symlink, not followed]"
    if entry.kind == "file":
        return f"{name}  ({entry.size} bytes)"
    return f"{name}  [{entry.kind}]"


def list_dir(ctx: ToolContext, args: Args) -> str:
    path = validate_read_path(args.get("path", "."), ctx.policy, ctx.workspace)
    entries = fs.list_entries(path, ctx.policy.read_roots)
    header = f"{for_display(str(path))}: {len(entries)} entries"
    lines = [_describe(e) for e in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
    return "\n".join([header, *lines])


# --- prepared file changes -------------------------------------------------------------------


@dataclass(frozen=True)
class FilePlan:
    """A validated file change: the resolved path, its content now (None: absent), and after."""

    path: Path
    before: bytes | None
    after: bytes

    @property
    def digest(self) -> str | None:
        return None if self.before is None else fs.digest_bytes(self.before)

    def fingerprint(self) -> dict[str, str | None]:
        return {
            "path": str(self.path),
            "sha256": self.digest,
            "new_sha256": fs.digest_bytes(self.after),
        }


Planner = Callable[[ToolContext, Args], FilePlan]


def _missing(ctx: ToolContext, raw: str, path: Path) -> ToolError:
    """The error for a change to a file that does not exist: where the file may be instead."""
    where = locate(ctx, raw)
    if where.unique is not None:
        return ToolError(
            f"{for_display(str(path))} does not exist; the one file whose path ends so is "
            f"{for_display(where.unique)}: use that path."
        )
    return ToolError(
        f"{for_display(str(path))} does not exist; create it with write_file.{where.hint()}"
    )


def current_content(ctx: ToolContext, raw_path: str) -> tuple[Path, bytes | None]:
    """Validate ``raw_path`` for writing and read what is there now (None when absent)."""
    path = validate_write_path(raw_path, ctx.policy, ctx.workspace)
    return path, fs.read_existing(path, ctx.policy.write_roots, MAX_EDIT_BYTES)


#: the control characters a text file may not hold: every C0 byte (NUL first) except tab,
#: newline, vertical tab, form feed, carriage return and escape (ANSI colours in a script)
BINARY_CONTROLS = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f]")


def check_text(tool: str, argument: str, text: str) -> None:
    """Refuse ``text`` for a text tool when it holds a byte a text file does not."""
    found = BINARY_CONTROLS.search(text)
    if found is None:
        return
    ch = found.group()
    name = "NUL" if ch == "\0" else f"the control character \\x{ord(ch):02x}"
    raise ToolInputError(
        f"{argument} contains {name} at character {found.start() + 1}: {tool} writes text "
        "only, and binary content cannot be shown for approval. Send text (escape it the way "
        "the file's language does), or create binary files with run_command."
    )


def check_not_binary(path: Path, data: bytes, tool: str) -> None:
    if is_binary(data):
        raise ToolError(
            f"{for_display(str(path), keep='')} is a binary file (it holds NUL bytes); {tool} "
            "edits text files only."
        )


def decode_text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"{for_display(str(path))} is not UTF-8 text; edit it with write_file or run_command."
        ) from None


def plan_write(ctx: ToolContext, args: Args) -> FilePlan:
    check_text("write_file", "content", str(args["content"]))
    path, before = current_content(ctx, args["path"])
    after = str(args["content"]).encode("utf-8", "surrogateescape")
    python_code.check_change(path, before, after, whole_file=True)
    return FilePlan(path, before, after)


def plan_edit(ctx: ToolContext, args: Args) -> FilePlan:
    old_text, new_text = str(args["old_text"]), str(args["new_text"])
    if not old_text:
        raise ToolInputError("old_text is empty; give the exact text to replace.")
    check_text("edit_file", "new_text", new_text)
    path, before = current_content(ctx, args["path"])
    if before is None:
        raise _missing(ctx, str(args["path"]), path)
    check_not_binary(path, before, "edit_file")
    text = decode_text(path, before)
    count = text.count(old_text)
    if count != 1:
        hint = (
            "copy the text exactly as read_file shows it, without the line numbers"
            if count == 0
            else "include more surrounding lines so it matches exactly once"
        )
        raise ToolError(
            f"old_text matches {count} times in {for_display(str(path))}; it must match exactly "
            f"once: {hint}."
        )
    after = text.replace(old_text, new_text, 1).encode("utf-8")
    python_code.check_change(path, before, after, whole_file=False)
    return FilePlan(path, before, after)


def plan_replace_function(ctx: ToolContext, args: Args) -> FilePlan:
    path, before = current_content(ctx, args["path"])
    shown = for_display(str(path), keep="")
    if not python_code.is_python(path):
        raise ToolInputError(
            f"replace_function edits Python files; for {shown} use edit_file or write_file."
        )
    name, code = str(args["name"]).strip(), str(args["code"])
    check_text("replace_function", "code", code)
    if before is None and name:
        raise _missing(ctx, str(args["path"]), path)
    if before is not None:
        check_not_binary(path, before, "replace_function")
    source = None if before is None else decode_text(path, before)
    by_name = bool(name) and not python_code.defined_inside(code, name)
    if by_name and source is not None:
        after = python_code.replace_definition(path, source, name, code)
    else:  # every definition the code holds (the code-block protocol's edits, or a class
        # sent whole to change the method it is named by)
        after = python_code.write_definitions(path, source, code)
    python_code.check_change(path, before, after.encode("utf-8"), whole_file=not by_name)
    return FilePlan(path, before, after.encode("utf-8"))


def _prepare(tool: str, planner: Planner) -> Callable[[ToolContext, Args], PreparedChange]:
    def prepare(ctx: ToolContext, args: Args) -> PreparedChange:
        plan = planner(ctx, args)
        shown = for_display(str(plan.path), keep="")
        if plan.after == plan.before:
            raise NothingToChange(
                f"nothing to change: {shown} already has exactly this content. If the task is "
                "not done, the code you send must differ from what the file holds now.",
                plan.before,
            )
        verb = "create" if plan.before is None else "modify"
        # Relative inside the workspace; a path outside it stays absolute, so it shows.
        label = for_display(relative_label(plan.path, ctx.workspace), keep="")
        return PreparedChange(
            tool=tool,
            arguments=args,
            summary=f"{tool}: {verb} {label} ({len(plan.after):,} bytes)",
            preview=unified_diff(plan.path, plan.before, plan.after, ctx.workspace),
            fingerprint=plan.fingerprint(),
            sensitive=sensitive_reason(plan.path, ctx.workspace),
        )

    return prepare


def _apply(planner: Planner) -> Callable[[ToolContext, PreparedChange], str]:
    def apply(ctx: ToolContext, change: PreparedChange) -> str:
        path, now = current_content(ctx, change.arguments["path"])
        if now is not None and fs.digest_bytes(now) == change.fingerprint.get("new_sha256"):
            # Applied already, e.g. by a process killed before it could record that it had:
            # resuming the approval must not turn a finished change into an error.
            shown = for_display(str(path))
            return f"{shown} already has the approved content; nothing to write"
        fresh = planner(ctx, change.arguments)
        if fresh.fingerprint() != thaw(change.fingerprint):
            raise ToolError(
                f"{for_display(str(fresh.path))} changed since this change was prepared (or "
                "now resolves elsewhere); nothing was written. Read it again and prepare a "
                "new change."
            )
        written = fs.atomic_write(
            fresh.path,
            fresh.after,
            ctx.policy,
            workspace=ctx.workspace,
            expected_digest=fresh.digest,
        )
        # relative inside the workspace: the absolute path is long, and the model knows where
        # it works
        name = (
            written.relative_to(ctx.workspace) if written.is_relative_to(ctx.workspace) else written
        )
        wrote = f"wrote {for_display(str(name))} ({len(fresh.after)} bytes)"
        return wrote + shown_back(fresh.before, fresh.after, sent=change.arguments.get("code"))

    return apply


def shown_back(before: bytes | None, after: bytes, *, sent: object = None) -> str:
    """The changed lines as they now read, numbered like read_file shows them, so the model
    sees what its change did without reading the file again. One span, from the first to the
    last changed line (found by common prefix and suffix: linear, whatever the file's size).
    When those lines are lines of the code the model ``sent``, as they stand there, they are
    not echoed: it has them, and a small model reads every prompt token at about 80 a second."""
    if is_binary(after):
        return ""
    old = [] if before is None else before.decode("utf-8", "replace").split("\n")
    new = after.decode("utf-8", "replace").split("\n")
    if new and new[-1] == "":
        new.pop()
    if old and old[-1] == "":
        old.pop()
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    first, last = head, len(new) - tail  # new[first:last] changed
    if first >= last:
        removed = len(old) - len(new)
        return f"; {removed} line(s) removed after line {first}" if new else "; the file is empty"
    if isinstance(sent, str) and "\n".join(["", *new[first:last], ""]) in f"\n{sent}\n":
        return f". Lines {first + 1}-{last} now read as you sent them"
    shown = new[first : min(last, first + SHOWN_BACK_LINES)]
    body = "\n".join(
        f"{n:>6}\t{for_display(line, keep=chr(9))}" for n, line in enumerate(shown, first + 1)
    )
    more = last - first - len(shown)
    note = f"\n[{more} more changed line(s) not shown]" if more else ""
    return f". Lines {first + 1}-{last} now read:\n{body}{note}"


def file_change_tool(spec: ToolSpec, planner: Planner) -> BuiltinTool:
    """A mutating tool whose change is fully described by ``planner``."""

    def planned(ctx: ToolContext, args: Args) -> tuple[Path, bytes | None, bytes]:
        plan = planner(ctx, args)
        return plan.path, plan.before, plan.after

    return BuiltinTool(
        spec, prepare=_prepare(spec.name, planner), apply=_apply(planner), planned=planned
    )


READ_FILE = BuiltinTool(
    ToolSpec(
        "read_file",
        "Read a text file. Lines come numbered; use offset/limit for long files.",
        object_schema(
            {
                "path": PATH_ARG,
                "offset": integer_arg("First line to show (1-based). Default 1.", minimum=1),
                "limit": integer_arg(
                    f"How many lines to show (at least {MIN_READ_LINES}). Default "
                    f"{DEFAULT_READ_LINES}.",
                    minimum=1,
                ),
            },
            ["path"],
        ),
    ),
    run=read_file,
)

LIST_DIR = BuiltinTool(
    ToolSpec(
        "list_dir",
        "List a directory: names, sizes, and symlink targets (symlinks are not followed).",
        object_schema(
            {"path": string_arg("Directory, absolute or relative to the workspace. Default '.'.")},
            [],
        ),
    ),
    run=list_dir,
)

WRITE_FILE = file_change_tool(
    ToolSpec(
        "write_file",
        "Create or overwrite a file with the given content. Needs the user's approval.",
        object_schema(
            {"path": PATH_ARG, "content": string_arg("The complete new content of the file.")},
            ["path", "content"],
        ),
        mutating=True,
    ),
    plan_write,
)

REPLACE_FUNCTION = file_change_tool(
    ToolSpec(
        "replace_function",
        "Write one whole function or class into a Python file: it replaces the definition of "
        "that name, or is added at the end of the file when there is none. Needs the user's "
        "approval.",
        object_schema(
            {
                "path": PATH_ARG,
                "name": string_arg(
                    "The function or class to replace: add, Calc or Calc.add; empty: every "
                    "definition in code replaces the one of its name."
                ),
                "code": string_arg("The complete new definition, from `def` to its last line."),
            },
            ["path", "name", "code"],
        ),
        mutating=True,
    ),
    plan_replace_function,
)

EDIT_FILE = file_change_tool(
    ToolSpec(
        "edit_file",
        "Replace one exact piece of text in a file. old_text must occur exactly once. "
        "Needs the user's approval.",
        object_schema(
            {
                "path": PATH_ARG,
                "old_text": string_arg("The exact text to replace (must occur exactly once)."),
                "new_text": string_arg("The text to put in its place."),
            },
            ["path", "old_text", "new_text"],
        ),
        mutating=True,
    ),
    plan_edit,
)
