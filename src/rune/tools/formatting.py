"""format_code: ruff for Python, as a prepared file change.

The file's current content goes to ``ruff format`` on stdin and the formatted text comes back
on stdout, so computing the diff writes nothing anywhere. Applying writes through
``fs.atomic_write`` like every edit.

Ruff never chooses its own configuration here: a config file can ``extend`` any file, and
ruff quotes a file it cannot parse in its error (a repo's ``extend = "~/.ssh/config"`` would
show a line of it). Rune finds the workspace's own config (:mod:`rune.tools.ruffconfig`),
checks that it and everything it extends lie in the workspace and may be read, and passes it
with ``--config``; with none, ruff runs ``--isolated`` (no user or parent-directory config).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from rune.errors import ToolError
from rune.tools.base import PATH_ARG, Args, ToolContext, object_schema
from rune.tools.display import for_display
from rune.tools.files import FilePlan, current_content, decode_text, file_change_tool
from rune.tools.ruffconfig import workspace_config
from rune.tools.spec import ToolSpec

PYTHON_SUFFIXES = (".py", ".pyi")
FORMAT_TIMEOUT = 30.0


def find_ruff() -> str | None:
    """ruff from the running interpreter's environment first, then PATH."""
    env_bin = os.path.dirname(sys.executable)
    search_path = os.pathsep.join(p for p in (env_bin, os.environ.get("PATH", "")) if p)
    return shutil.which("ruff", path=search_path)


def ruff_format(ruff: str, path: Path, source: bytes, config: Path | None) -> bytes:
    """``ruff format`` of ``source`` with exactly ``config`` (None: no configuration at all)."""
    chosen = ["--config", str(config)] if config is not None else ["--isolated"]
    try:
        done = subprocess.run(
            [ruff, "format", "--no-cache", *chosen, "--stdin-filename", str(path), "-"],
            input=source,
            capture_output=True,
            timeout=FORMAT_TIMEOUT,
            cwd=path.parent,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"ruff took longer than {FORMAT_TIMEOUT:.0f} s; nothing changed.") from None
    except OSError as err:
        raise ToolError(f"cannot run ruff ({ruff}): {err.strerror or err}.") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        raise ToolError(f"ruff could not format {for_display(str(path))}: {for_display(message)}")
    return done.stdout


def plan_format(ctx: ToolContext, args: Args) -> FilePlan:
    path, before = current_content(ctx, args["path"])
    shown = for_display(str(path))
    if before is None:
        raise ToolError(f"{shown} does not exist.")
    if path.suffix.lower() not in PYTHON_SUFFIXES:
        raise ToolError(
            f"no formatter for {shown}: Rune formats Python files ({', '.join(PYTHON_SUFFIXES)}) "
            "with ruff. Edit other files with edit_file."
        )
    ruff = find_ruff()
    if ruff is None:
        raise ToolError(
            "no formatter available: ruff is not installed in Rune's environment or on PATH "
            "(pip install ruff)."
        )
    decode_text(path, before)
    config = workspace_config(path, ctx.workspace, ctx.policy)
    return FilePlan(path, before, ruff_format(ruff, path, before, config))


FORMAT_CODE = file_change_tool(
    ToolSpec(
        "format_code",
        "Format a Python file with ruff. Shows the diff and needs the user's approval.",
        object_schema({"path": PATH_ARG}, ["path"]),
        mutating=True,
    ),
    plan_format,
)
