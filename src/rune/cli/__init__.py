"""The ``rune`` command.

Only the standard library is imported here, so ``rune --help`` and ``rune --version`` start
fast; each subcommand imports what it needs when it runs (:mod:`rune.cli.commands`).

Exit status: 0 success; 1 the task or a check failed; 2 bad usage or configuration;
3 an approval is waiting (no answer on a non-interactive stdin); 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from rune.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PENDING, EXIT_USAGE

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PENDING",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

_EPILOG = """\
first time? `rune demo` fixes a bug in a throw-away sample project.
exit status: 0 done, 1 failed, 2 bad usage or config, 3 approval waiting, 130 interrupted."""


def _backend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model name, or a path to a .gguf file")
    parser.add_argument(
        "--backend",
        help="'ollama', 'embedded', 'scripted' or an OpenAI-compatible base URL "
        "(default: Ollama if it answers, else the embedded demo model)",
    )
    parser.add_argument("--workspace", help="project directory (default: the current one)")
    parser.add_argument(
        "--protocol",
        choices=("auto", "native", "text", "constrained"),
        help="how the model calls tools (default auto: constrained for the embedded backend, "
        "native when the server's model has tools, else text)",
    )


def _sandbox_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--write-root",
        action="append",
        metavar="DIR",
        help="also let Rune write in DIR (default: only the workspace); repeatable",
    )
    parser.add_argument(
        "--allow-credential",
        action="append",
        metavar="PATH",
        help="let Rune read this credential store, or a file in one (never write); repeatable",
    )


def _inspect(parser: argparse.ArgumentParser) -> None:
    _backend_options(parser)
    _sandbox_options(parser)


def _loop_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-iterations", type=int, metavar="N", help="model turns per task, 1-8 (default 8)"
    )
    parser.add_argument(
        "--yes",
        "-y",
        action="count",
        default=0,
        help="approve file edits inside the workspace without asking (not sensitive ones: "
        "AGENTS.md, conftest.py, CI, ...); give it twice to approve commands too",
    )


def _run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="what to do, in plain words")
    _backend_options(parser)
    _loop_options(parser)
    _sandbox_options(parser)
    parser.add_argument("--session", help="continue this session with a new task")


def _demo(parser: argparse.ArgumentParser) -> None:
    _backend_options(parser)
    _loop_options(parser)
    _sandbox_options(parser)


def _resume(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", nargs="?", help="session id (see `rune sessions`)")
    _loop_options(parser)
    _sandbox_options(parser)
    parser.add_argument("--model", help="use another model than the session's")
    parser.add_argument("--backend", help="use another backend than the session's")


def _nothing(parser: argparse.ArgumentParser) -> None:
    pass


def _pull(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name", nargs="?", help="a catalogue model, e.g. qwen2.5-coder:1.5b (none: list them)"
    )


def _tui(parser: argparse.ArgumentParser) -> None:
    _backend_options(parser)
    _loop_options(parser)
    _sandbox_options(parser)
    parser.add_argument("--session", help="open this session (a pending approval opens first)")
    parser.add_argument("task", nargs="?", help="a task to start with")


# name -> (one-line help, how its options are declared). Only the chosen command's parser is
# built: building all of them costs more than the rest of `rune --help` together.
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "run": ("do one task in the workspace", _run),
    "demo": ("fix a broken add() in a throw-away sample project", _demo),
    "resume": ("pick up a session (default: the latest pending one)", _resume),
    "sessions": ("list sessions and their state", _nothing),
    "pull": ("download a model Rune runs itself (none given: list them)", _pull),
    "models": ("the server's models and the pulled ones: tools, context", _backend_options),
    "doctor": ("check the server, model, sandbox policy and containment", _inspect),
    "mcp": ("start your MCP servers: their state, tools and which ask first", _inspect),
    "config": ("show each effective setting and where it came from", _inspect),
    "tui": ("the full-screen interface", _tui),
}


class _VersionAction(argparse.Action):
    """``--version``: the line is built only when asked, since in a checkout it runs git."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from rune.distribution import version_line

        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The top level: ``--version``, and which command; its own options are parsed after."""
    listing = "\n".join(f"  {name:<10} {text}" for name, (text, _) in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="rune",
        usage="rune [-h] [--version] COMMAND [options]",
        description="A local-first coding agent for the models you run yourself.",
        epilog=f"commands:\n{listing}\n\n{_EPILOG}\n`rune COMMAND --help` shows its options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="show the version (and the commit, in a git checkout) and exit",
    )
    parser.add_argument("command", nargs="?", choices=COMMANDS, metavar="COMMAND", help="see below")
    parser.add_argument("options", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def command_parser(name: str) -> argparse.ArgumentParser:
    text, declare = COMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"rune {name}", description=text, epilog=_EPILOG)
    declare(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    top = build_parser().parse_args(argv)
    if top.command is None:
        build_parser().print_help()
        return EXIT_USAGE
    args = command_parser(top.command).parse_args(top.options)
    args.command = top.command
    from rune.cli.commands import dispatch

    return dispatch(args)


if __name__ == "__main__":
    sys.exit(main())
