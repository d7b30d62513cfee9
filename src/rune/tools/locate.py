"""Finding a file the model named by a path that does not exist.

In a repository, a small model names files as the task or a traceback did: ``test_mod.py``
for ``pkg/tests/test_mod.py``, or a path from the wrong folder. Told only "does not exist", it
gave up ("the test file does not exist") or wrote a new file at the top. So a relative path
that does not exist is looked for in the workspace: when exactly one file ends with it, read
tools read that one (and say so); otherwise the error lists the nearest names.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rune.errors import ToolError
from rune.tools import fs
from rune.tools.base import ToolContext

#: files looked at before the search stops (a search that stops finds nothing unique)
MAX_FILES = 20_000
#: near names listed
SHOWN = 5
#: directories that hold no file of the project's own (hidden ones are skipped too)
SKIPPED_DIRS = frozenset(
    {"__pycache__", "node_modules", "venv", "build", "dist", "target", "site-packages"}
)


def is_skipped(part: str) -> bool:
    return part.startswith(".") or part in SKIPPED_DIRS


def project_files(workspace: Path, roots: Sequence[Path], limit: int) -> list[str]:
    """The project's files, relative to ``workspace``, in walk order: at most ``limit + 1``
    (more than ``limit``: the walk stopped), none when it cannot be walked."""
    names: list[str] = []
    try:
        for _, path in fs.walk_files(workspace, roots, lambda d: is_skipped(d.name)):
            names.append(path.relative_to(workspace).as_posix())
            if len(names) > limit:
                break
    except (ToolError, OSError):
        return []
    return names


@dataclass(frozen=True, slots=True)
class Found:
    """The one workspace file a missing path ends with (None: none or several), and the
    nearest workspace-relative names otherwise."""

    unique: str | None
    near: tuple[str, ...]

    def hint(self) -> str:
        if not self.near:
            return ""
        return " Files with a similar name: " + ", ".join(self.near) + "."


def locate(ctx: ToolContext, raw: str) -> Found:
    """Where in the workspace a relative path that does not exist may be."""
    wanted = PurePosixPath(raw.strip().removeprefix("./"))
    if wanted.is_absolute() or not wanted.parts or ".." in wanted.parts:
        return Found(None, ())
    files = project_files(ctx.workspace, ctx.policy.read_roots, MAX_FILES)
    if not files or len(files) > MAX_FILES:
        return Found(None, ())
    tail = "/" + wanted.as_posix()
    ending = [name for name in files if ("/" + name).endswith(tail)]
    if len(ending) == 1:
        return Found(ending[0], ())
    if ending:
        return Found(None, tuple(sorted(ending)[:SHOWN]))
    by_name: dict[str, list[str]] = {}
    for name in files:
        by_name.setdefault(PurePosixPath(name).name, []).append(name)
    close = difflib.get_close_matches(wanted.name, list(by_name), n=SHOWN, cutoff=0.6)
    near = [path for name in close for path in sorted(by_name[name])]
    return Found(None, tuple(near[:SHOWN]))
