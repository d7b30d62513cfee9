"""search: a regular expression over the text files below a path.

The walk never follows a symlink (file or directory), never enters ``.git`` or a blocked
location, skips credential stores without a word (their names are not evidence the model
needs), skips binary and huge files, and stops at a match, file and time budget, saying so.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rune.errors import ToolError, ToolInputError
from rune.tools import fs
from rune.tools.base import Args, BuiltinTool, ToolContext, object_schema, string_arg
from rune.tools.display import for_display, is_binary
from rune.tools.sandbox import validate_read_path
from rune.tools.spec import ToolSpec

MAX_MATCHES = 100
MAX_FILE_BYTES = 1024 * 1024
MAX_FILES = 20_000
MAX_LINE_CHARS = 300
TIME_BUDGET = 10.0
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn"})


@dataclass
class _Tally:
    files: int = 0
    binary: int = 0
    huge: int = 0
    unreadable: int = 0
    matches: list[str] = field(default_factory=list)
    stopped: str = ""


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ToolInputError(
            f"invalid regular expression {pattern!r}: {err}. Use Python re syntax."
        ) from None


def _files(ctx: ToolContext, top: Path) -> Iterator[tuple[int, Path]]:
    roots = ctx.policy.read_roots
    if stat.S_ISREG(os.lstat(top).st_mode):
        with fs.open_parent(top, roots, create=False) as parent:
            yield parent, top
        return

    def skip_dir(path: Path) -> bool:
        return (
            path.name in SKIPPED_DIRS
            or ctx.policy.blocked_hit(path) is not None
            or ctx.policy.credential_hit(path) is not None
        )

    for parent, path in fs.walk_files(top, roots, skip_dir):
        if ctx.policy.credential_hit(path) is None:
            yield parent, path


def _shown(ctx: ToolContext, path: Path) -> str:
    rel = path.relative_to(ctx.workspace) if path.is_relative_to(ctx.workspace) else path
    return for_display(str(rel), keep="")


def _scan(ctx: ToolContext, rx: re.Pattern[str], top: Path, glob: str | None) -> _Tally:
    tally = _Tally()
    deadline = time.monotonic() + TIME_BUDGET
    for parent, path in _files(ctx, top):
        rel = path.relative_to(top).as_posix() if path != top else path.name
        if glob and not (fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(path.name, glob)):
            continue
        if tally.files >= MAX_FILES or time.monotonic() > deadline:
            tally.stopped = f"[stopped after {tally.files} files: search budget reached]"
            break
        tally.files += 1
        try:
            found = fs.read_at(parent, path.name, path, MAX_FILE_BYTES)
        except (ToolError, FileNotFoundError):
            tally.unreadable += 1
            continue
        if found.truncated:
            tally.huge += 1
            continue
        if is_binary(found.data):
            tally.binary += 1
            continue
        text = found.data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.split("\n"), 1):
            if rx.search(line):
                shown_line = for_display(line[:MAX_LINE_CHARS], keep="\t")
                tally.matches.append(f"{_shown(ctx, path)}:{number}: {shown_line}")
                if len(tally.matches) >= MAX_MATCHES:
                    tally.stopped = (
                        f"[stopped at {MAX_MATCHES} matches; narrow the pattern, path or glob]"
                    )
                    return tally
    return tally


def search(ctx: ToolContext, args: Args) -> str:
    rx = _compile(args["pattern"])
    top = validate_read_path(args.get("path", "."), ctx.policy, ctx.workspace)
    glob = args.get("glob")
    try:
        tally = _scan(ctx, rx, top, glob)
    except FileNotFoundError:
        raise ToolError(f"{for_display(str(top))} does not exist.") from None
    notes = [tally.stopped] if tally.stopped else []
    skipped = [
        f"{n} {what}"
        for n, what in (
            (tally.binary, "binary"),
            (tally.huge, f"over {MAX_FILE_BYTES // 1024} KiB"),
            (tally.unreadable, "unreadable, special or hard-linked"),
        )
        if n
    ]
    if skipped:
        notes.append(f"[skipped files: {', '.join(skipped)}]")
    if not tally.matches:
        head = f"no matches for {args['pattern']!r} in {tally.files} files under {_shown(ctx, top)}"
        return "\n".join([for_display(head), *notes])
    return "\n".join([*tally.matches, *notes])


SEARCH = BuiltinTool(
    ToolSpec(
        "search",
        "Search text files for a regular expression (Python re syntax). Returns "
        "path:line: text for each match. Symlinks, .git, binary and huge files are skipped.",
        object_schema(
            {
                "pattern": string_arg("Regular expression to look for."),
                "path": string_arg("File or directory to search. Default: the workspace."),
                "glob": string_arg("Only files whose name or relative path matches, e.g. *.py"),
            },
            ["pattern"],
        ),
    ),
    run=search,
)
