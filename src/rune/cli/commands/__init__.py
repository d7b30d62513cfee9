"""The commands, one module each (``rune.cli.commands.NAME``, its ``command(args)`` carries it
out), named by the one registry, :data:`rune.cli.registry.COMMANDS`. :func:`dispatch` runs the
chosen one and turns an expected failure into its one line and exit status."""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable

from rich.text import Text

from rune.cli.consoles import err, out
from rune.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from rune.cli.registry import COMMANDS
from rune.cli.unstarted import RunNotStarted, report
from rune.errors import ConfigError, RuneError, SessionNotFound


def handler(name: str) -> Callable[[argparse.Namespace], int]:
    """The ``command`` function of the module the registry names for ``name``."""
    module = importlib.import_module(f"{__name__}.{COMMANDS[name].module}")
    found: Callable[[argparse.Namespace], int] = module.command
    return found


def dispatch(args: argparse.Namespace) -> int:
    command = handler(args.command)
    try:
        return command(args)
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED
    except ConfigError as error:
        err.print(Text(f"config error: {error}", style="bold red"))
        return EXIT_USAGE
    except RunNotStarted as failure:
        return report(failure, out)
    except SessionNotFound as error:  # a session id mistyped is bad usage
        err.print(Text(f"{error.kind}: {error}; `rune sessions` lists them", style="bold red"))
        return EXIT_USAGE
    except RuneError as error:
        err.print(Text(f"{error.kind}: {error}", style="bold red"))
        return EXIT_FAILED
    except BrokenPipeError:
        raise  # the reader went away: rune.cli.main exits quietly
    except Exception as error:  # a bug: one line, no traceback (RUNE_DEBUG=1 shows it)
        if os.environ.get("RUNE_DEBUG"):
            raise
        err.print(Text(f"internal error: {type(error).__name__}: {error}", style="bold red"))
        return EXIT_FAILED
