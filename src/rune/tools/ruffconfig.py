"""The workspace's own ruff configuration, checked before ruff is allowed to read it.

Ruff looks for ``.ruff.toml``, ``ruff.toml`` or a ``pyproject.toml`` with ``[tool.ruff]`` in
the file's directory and its parents, then in the user's config directory, and follows
``extend`` to any file. Rune does the looking itself, only inside the workspace, reads each
file through the read policy (so a credential store is refused, not parsed), and follows
``extend`` only while it stays in the workspace. Errors name the config and the ``extend``
value (both workspace content), never the content of the file it points at.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from rune.errors import ToolError
from rune.tools import fs
from rune.tools.display import for_display
from rune.tools.sandbox import SandboxPolicy, validate_read_path, within

CONFIG_NAMES = (".ruff.toml", "ruff.toml", "pyproject.toml")
MAX_CONFIG_BYTES = 256 * 1024
MAX_EXTENDS = 8


def workspace_config(path: Path, workspace: Path, policy: SandboxPolicy) -> Path | None:
    """The config ruff should use for ``path``: the nearest one between its directory and the
    workspace root, checked; None when there is none (or the file is outside the workspace)."""
    if not within(path, (workspace,)):
        return None
    directory = path.parent
    while True:
        for name in CONFIG_NAMES:
            candidate = directory / name
            if not os.path.lexists(candidate):
                continue
            table = _ruff_table(candidate, workspace, policy)
            if table is not None:
                _check_extends(candidate, table, workspace, policy, seen={candidate})
                return candidate
        if directory == workspace or directory == directory.parent:
            return None
        directory = directory.parent


def _shown(path: Path) -> str:
    return for_display(str(path), keep="")


def _ruff_table(config: Path, workspace: Path, policy: SandboxPolicy) -> dict[str, Any] | None:
    """Ruff's settings in ``config`` (None: a pyproject.toml without ``[tool.ruff]``)."""
    resolved = validate_read_path(config, policy, workspace, file_target=True)
    if not within(resolved, (workspace,)):
        raise ToolError(
            f"ruff config {_shown(config)} resolves to {_shown(resolved)}, outside the "
            "workspace; Rune runs ruff only with configuration from the workspace."
        )
    found = fs.read_regular_file(resolved, policy.read_roots, MAX_CONFIG_BYTES)
    if found.truncated:
        raise ToolError(f"ruff config {_shown(config)} is over {MAX_CONFIG_BYTES} bytes.")
    try:
        data = tomllib.loads(found.data.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as err:
        raise ToolError(f"ruff config {_shown(config)} is not valid TOML: {err}.") from None
    if config.name != "pyproject.toml":
        return data
    tool = data.get("tool")
    table = tool.get("ruff") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else None


def _check_extends(
    config: Path,
    table: dict[str, Any],
    workspace: Path,
    policy: SandboxPolicy,
    *,
    seen: set[Path],
) -> None:
    extend = table.get("extend")
    if extend is None:
        return
    if not isinstance(extend, str) or "$" in extend:
        raise ToolError(
            f"ruff config {_shown(config)} has extend = {extend!r}; Rune follows only a plain "
            "path inside the workspace (no environment variables)."
        )
    target = Path(os.path.normpath(config.parent / os.path.expanduser(extend)))
    if not within(target, (workspace,)):
        raise ToolError(
            f"ruff config {_shown(config)} extends {extend!r}, outside the workspace; Rune runs "
            "ruff only with configuration from the workspace. Remove the extend, or copy the "
            "settings it needs into the workspace's config."
        )
    if target in seen or len(seen) > MAX_EXTENDS:
        raise ToolError(f"ruff config {_shown(config)} extends in a loop or too deep.")
    extended = _ruff_table(target, workspace, policy)
    if extended is not None:
        _check_extends(target, extended, workspace, policy, seen={*seen, target})
