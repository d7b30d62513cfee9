"""``rune models``: the server's models, then the pulled ones."""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text

from rune.cli import consoles
from rune.cli.driving import load_config
from rune.cli.exits import (
    EXIT_OK,
)
from rune.errors import BackendUnavailable

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    """The server's models (when a server is chosen), then the models Rune runs itself."""
    from contextlib import ExitStack

    from rune.app import choose_backend, open_transport
    from rune.models.catalog import CATALOG, pulled_path

    settings = load_config(args).settings
    try:
        choice = choose_backend(settings)
    except BackendUnavailable as error:
        out.print(Text(str(error).splitlines()[0], style="yellow"))
        choice = None
    if choice is not None and choice.kind in ("ollama", "openai", "scripted"):
        with ExitStack() as stack:
            transport, model = open_transport(choice, settings, stack)
            names = list(transport.list_models()) if hasattr(transport, "list_models") else [model]
            table = Table("model", "tools", "thinking", "context", box=None)
            for name in names:
                table.add_row(
                    name,
                    "yes" if transport.supports_tools(name) else "no (text protocol)",
                    "yes" if transport.supports_thinking(name) else "no",
                    str(transport.context_length(name) or "?"),
                )
        out.print(f"{choice.label} ({choice.reason})")
        out.print(table)
    pulled = Table("model", "size", "file", box=None)
    for entry in CATALOG.values():
        path = pulled_path(entry)
        if path is not None:
            pulled.add_row(entry.name, f"{entry.size / 1e9:.2f} GB", str(path))
    if pulled.row_count:
        out.print("pulled, run embedded (constrained protocol):")
        out.print(pulled)
    else:
        out.print("no model pulled; `rune pull` lists what Rune can run itself")
    return EXIT_OK
