"""The ``rune`` command.

Only the standard library is imported here, so ``rune --help`` and ``rune --version`` start
fast; each command (one module under :mod:`rune.cli.commands`, named by the registry,
:mod:`rune.cli.registry`) imports what it needs when it runs.

Exit status (:data:`EXIT_MEANINGS`, also in ``--help`` and the README): 0 done; 1 failed (an
error, or the demo's check); 2 bad usage or configuration; 3 an approval is waiting (no answer
on a non-interactive stdin); 4 answered, but not finished (the last change failed or was
rejected, or the answer was cut off); 5 the iteration budget ran out (``rune resume ID
--continue``); 130 interrupted; 141 the output was closed by its reader (``| head``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

from rune.cli.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_LIMIT,
    EXIT_MEANINGS,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_USAGE,
)
from rune.cli.registry import COMMANDS

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_LIMIT",
    "EXIT_OK",
    "EXIT_PENDING",
    "EXIT_USAGE",
    "build_parser",
    "main",
]
_EPILOG = (
    "first time? `rune demo` fixes a bug in a throw-away sample project. `rune` alone opens "
    'the full-screen interface; `rune "TASK"` is `rune run "TASK"`.\nexit status: '
    + ", ".join(f"{code} {meaning}" for code, meaning in EXIT_MEANINGS.items())
    + "."
)


class Parser(argparse.ArgumentParser):
    """argparse, but a reader gone while it prints (``rune --help | head -1``) is exit 141,
    as everywhere else: argparse itself ignores the failed write."""

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if message:
            (file or sys.stderr).write(message)


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
    listing = "\n".join(f"  {name:<12} {command.help}" for name, command in COMMANDS.items())
    parser = Parser(
        prog="rune",
        usage='rune [-h] [--version] [COMMAND [options] | "TASK" [options]]',
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
    command = COMMANDS[name]
    parser = Parser(prog=f"rune {name}", description=command.help, epilog=_EPILOG)
    command.declare(parser)
    return parser


def fill_closed_std_fds() -> None:
    """Open /dev/null on a standard descriptor the caller closed (``<&-``): otherwise the next
    file or pipe Rune opens gets that number, and a child process's stdin would be it."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)


#: the options of ``rune`` itself; any other option starts a task's (``rune run``)
_TOP_OPTIONS = frozenset({"-h", "--help", "--version"})
#: what a command's name looks like: only such a word can be a misspelt command
_COMMAND_NAME = re.compile(r"[a-z][a-z-]{0,19}")
#: how alike a word and a command's name must be for the word to read as a typo of it
#: (`sesions`, `doctr`, `conifg`), not as a one-word task (`fix`, `refactor`, `docs`)
_NEAR_MISS = 0.75


def near_miss(word: str) -> str | None:
    """The command ``word`` is a typo of, if it looks like one."""
    if word in COMMANDS or not _COMMAND_NAME.fullmatch(word):
        return None
    import difflib  # only for a word that is no command: `rune --help` stays fast

    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=_NEAR_MISS)
    return close[0] if close else None


def shorthand(argv: Sequence[str]) -> list[str] | None:
    """The command line ``argv`` stands for, when it is one of the short ways in: nothing
    (``rune``: the full-screen interface on a terminal), or a task in plain words, maybe after
    its options (``rune "fix the tests"``, ``rune fix``: ``rune run``). None: ``argv`` is read
    as it is.

    A first word that is a near-miss of a command's name (``rune sesions``) is left to
    :func:`unknown_command`, so a typo is an error that names the command, never a task."""
    # A closed stdin or stdout is None here.
    at_terminal = all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout))
    if not argv:
        return ["tui"] if at_terminal else None
    first = argv[0]
    if first in _TOP_OPTIONS or first in COMMANDS or near_miss(first):
        return None
    if at_terminal and first.startswith("-") and options_only(argv):
        return ["tui", *argv]  # `rune --model M`: the interface with those options
    # A task in plain words, or options before it (`rune --backend URL "TASK"`).
    return ["run", *argv]


def options_only(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is options of the interface and no task (``rune --backend URL``)."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            known, extra = command_parser("tui").parse_known_args(list(argv))
    except SystemExit:  # not options of the interface: `rune run` says what is wrong
        return False
    return not extra and getattr(known, "task", None) is None


def unknown_command(name: str, command: str) -> str:
    """The error for a first word that is a typo of ``command``'s name."""
    return (
        f"rune: unknown command {name!r}. Did you mean `rune {command}`? A task goes in "
        f'quotes, in plain words: rune "fix the failing test" (or `rune run {name}`). '
        "`rune --help` lists the commands."
    )


def main(argv: Sequence[str] | None = None) -> int:
    fill_closed_std_fds()
    try:
        try:
            status = run(argv)
        except SystemExit:  # --help, --version, a usage error: what they printed goes now
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # what is still buffered: a reader gone shows here
        return status
    except BrokenPipeError:
        # The reader went away (`rune sessions | head`): nothing more can be said there.
        silence_stdout()
        return EXIT_BROKEN_PIPE


def run(argv: Sequence[str] | None) -> int:
    """The command line, read and carried out: its exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    words = shorthand(words) or words
    typo = near_miss(words[0]) if words else None
    if typo:
        print(unknown_command(words[0], typo), file=sys.stderr)
        return EXIT_USAGE
    top = build_parser().parse_args(words)
    if top.command is None:
        build_parser().print_help()
        print("\n(on a terminal, `rune` alone opens the full-screen interface)")
        return EXIT_USAGE
    args = command_parser(top.command).parse_args(top.options)
    args.command = top.command
    if args.command == "sessions" and args.action == "list" and not args.ids:
        from rune.cli.listing import list_sessions

        return list_sessions()  # the common case, without the rest of the CLI's imports
    from rune.cli.commands import dispatch

    return dispatch(args)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush cannot fail loudly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
