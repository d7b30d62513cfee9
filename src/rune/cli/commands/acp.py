"""``rune acp``: serve an editor over the Agent Client Protocol on stdio."""

from __future__ import annotations

import argparse

from rich.text import Text

from rune.cli import consoles
from rune.cli.driving import load_config
from rune.cli.exits import (
    EXIT_USAGE,
)

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    """Serve the Agent Client Protocol on stdio (docs/acp.md); each editor session is a Rune
    session in the directory the editor names."""
    try:
        from rune.acp.server import serve
    except ImportError as error:
        from rune.distribution import extra_install_hint

        err.print(
            Text(
                f"rune acp needs the Agent Client Protocol SDK ({error}); install it with: "
                + extra_install_hint("acp"),
                style="bold red",
            )
        )
        return EXIT_USAGE
    load_config(args)  # a bad flag or config file is said now, on stderr, not per session
    return serve(lambda extra: load_config(args, warn=False, **extra))
