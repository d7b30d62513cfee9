"""``rune tui``: the full-screen interface."""

from __future__ import annotations

import argparse
import sys

from rich.text import Text

from rune.cli import consoles
from rune.cli.driving import load_config
from rune.cli.exits import (
    EXIT_OK,
    EXIT_USAGE,
)

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    from rune.app import open_rune
    from rune.tui import RuneApp

    streams = (sys.stdin, sys.stdout)
    if not all(stream is not None and stream.isatty() for stream in streams):
        err.print(
            Text(
                'rune tui needs a terminal on stdin and stdout; without one use `rune run "TASK"`',
                style="bold red",
            )
        )
        return EXIT_USAGE
    loaded = load_config(args)
    title = (args.task or "")[:80]
    with open_rune(loaded, session_id=args.session, title=title, can_ask=True) as rune:
        app = RuneApp(rune, task=args.task)
        app.run()
    if app.farewell:
        err.print(Text(app.farewell, style="yellow"))
    return app.return_code or EXIT_OK
