"""``rune config``: each effective setting and where it came from."""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text

from rune.cli import consoles
from rune.cli.driving import load_config
from rune.cli.exits import (
    EXIT_OK,
)
from rune.settings.config import KEYS

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    from rune.settings.config import project_config_file, user_config_file

    loaded = load_config(args, warn=False)
    rows = []
    for key in KEYS:
        value = loaded.settings.value(key)
        if key == "api_key" and value:
            value = "***"
        shown = "(not set)" if value is None else _show(value)
        rows.append((key, shown, loaded.sources[key]))
    if out.is_terminal:
        table = Table("key", "value", "from", box=None)
        for row in rows:
            table.add_row(*row)
        out.print(table)
    else:
        # Piped (no terminal width): a table would cut long values; whole ones, one a line.
        width = max(len(key) for key, _, _ in rows)
        for key, shown, source in rows:
            out.print(f"{key:<{width}}  {shown}  {source}")
    out.print(f"user file:    {user_config_file()}")
    out.print(f"project file: {project_config_file(loaded.settings.workspace)}")
    for note in loaded.refused:
        out.print(Text(f"refused: {note}", style="yellow"))
    return EXIT_OK


def _show(value: object) -> str:
    if isinstance(value, tuple | list):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value).lower() if isinstance(value, bool) else str(value)
