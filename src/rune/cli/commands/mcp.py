"""``rune mcp``: start the user's MCP servers, list their state and tools, stop them."""

from __future__ import annotations

import argparse

from rich.text import Text

from rune.cli import consoles
from rune.cli.driving import load_config
from rune.cli.exits import (
    EXIT_FAILED,
    EXIT_OK,
)

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    """Start the configured MCP servers, list each with its state and tools, stop them."""
    from rune.app import mcp_servers
    from rune.cli.doctor import mcp_checks
    from rune.settings.config import user_config_file

    loaded = load_config(args)
    if not loaded.mcp_servers:
        out.print(f"no MCP servers configured; add [mcp.servers.NAME] to {user_config_file()}")
        return EXIT_OK
    with mcp_servers(loaded.mcp_servers, loaded.settings) as manager:
        assert manager is not None  # there are servers
        checks = mcp_checks(manager)
        for check, status in zip(checks, manager.statuses(), strict=True):
            mark = Text("ok  ", style="green") if check.ok else Text("!!  ", style="bold red")
            out.print(mark + Text(f"{check.name}: {check.found}"))
            for tool in status.tools:
                how = "asks first" if tool.asks else "runs at once"
                why = (
                    "trusted by your config"
                    if tool.trusted
                    else ("declared read-only" if tool.read_only else "not declared read-only")
                )
                out.print(Text(f"      {tool.name:<32} {how} ({why})"))
            for warning in status.warnings:
                out.print(Text(f"      warning: {warning}", style="yellow"))
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED
