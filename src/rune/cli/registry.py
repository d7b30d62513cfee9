"""The ``rune`` commands: :data:`COMMANDS`, the one registry (each command's help line, its
options, its module), and the options each declares. Standard library only: ``rune --help``
reads it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

_DEFAULT_BACKEND = "default: Ollama if it answers, else the embedded model"


def _help(flag: str) -> str:
    """A settings flag's help line, as its setting declares it (rune.settings.keys). Imported
    when a command's options are built, not for ``rune --help``, which lists commands only."""
    from rune.settings.keys import flag_help

    return flag_help(flag)


#: what --protocol takes (rune.runtime.protocols.PROTOCOLS, not imported for rune --help)
PROTOCOL_CHOICES = ("auto", "native", "text", "constrained", "blocks")


def _backend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help=_help("--model"))
    parser.add_argument("--backend", help=f"{_help('--backend')} ({_DEFAULT_BACKEND})")
    _api_key_option(parser)
    parser.add_argument("--workspace", help=_help("--workspace"))
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help=_help("--timeout"))
    parser.add_argument(
        "--protocol",
        choices=PROTOCOL_CHOICES,
        help=_help("--protocol"),
    )


def _api_key_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-key", metavar="KEY", help=_help("--api-key"))


def _sandbox_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--write-root", action="append", metavar="DIR", help=_help("--write-root"))
    parser.add_argument(
        "--allow-credential", action="append", metavar="PATH", help=_help("--allow-credential")
    )


def _inspect(parser: argparse.ArgumentParser) -> None:
    _backend_options(parser)
    _sandbox_options(parser)


def _loop_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-iterations",
        type=int,
        metavar="N",
        help=f"{_help('--max-iterations')} (default 8)",
    )
    parser.add_argument("--max-budgets", type=int, metavar="N", help=_help("--max-budgets"))
    parser.add_argument("--yes", "-y", action="count", default=0, help=_help("--yes"))


def _task(text: str) -> str:
    """A task as typed: refused when it says nothing, so that an empty string (a shell
    variable left unset) never starts a run the model fills in."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the task is empty: say what to do, in plain words")
    return text


def _run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", type=_task, help="what to do, in plain words")
    _backend_options(parser)
    _loop_options(parser)
    _sandbox_options(parser)
    parser.add_argument("--session", help="continue this session with a new task")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the run as JSON lines on stdout, one event a line, a result last "
        "(docs/json.md); the exit status is the same",
    )


def _demo(parser: argparse.ArgumentParser) -> None:
    _backend_options(parser)
    _loop_options(parser)
    _sandbox_options(parser)


def _resume(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", nargs="?", help="session id (see `rune sessions`)")
    _loop_options(parser)
    _sandbox_options(parser)
    parser.add_argument("--model", help=f"{_help('--model')} (default: the session's)")
    parser.add_argument("--backend", help=f"{_help('--backend')} (default: the session's)")
    _api_key_option(parser)
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help=_help("--timeout"))
    parser.add_argument(
        "--continue",
        dest="again",
        action="store_true",
        help="run the last task again with a fresh budget of model turns, on the same "
        "conversation: after the budget ran out, a failure or an unfinished answer",
    )


def _sessions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=("list", "show", "rm", "prune"),
        default="list",
        help="list (default); show ID: the whole conversation and every tool's full output; "
        "rm ID...: delete sessions; prune: delete ended sessions older than --days",
    )
    parser.add_argument("ids", nargs="*", metavar="ID", help="session ids (show, rm)")
    parser.add_argument(
        "--days",
        type=float,
        default=30,
        metavar="N",
        help="prune: sessions not updated for N days (default 30; 0: all ended ones). A "
        "session waiting for approval, running or interrupted is kept",
    )


def _pull(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name", nargs="?", help="a catalogue model, e.g. qwen2.5-coder:1.5b (none: list them)"
    )


def _tui(parser: argparse.ArgumentParser) -> None:
    _backend_options(parser)
    _loop_options(parser)
    _sandbox_options(parser)
    parser.add_argument("--session", help="open this session (a pending approval opens first)")
    parser.add_argument("task", nargs="?", type=_task, help="a task to start with")


def _undo_session(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session", nargs="?", help="session id (default: the latest one of this workspace)"
    )
    parser.add_argument("--workspace", help=_help("--workspace"))


def _undo(parser: argparse.ArgumentParser) -> None:
    _undo_session(parser)
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--all", dest="every", action="store_true", help="undo every change still in effect"
    )
    which.add_argument("--step", type=int, metavar="N", help="undo step N's change (see --list)")
    which.add_argument(
        "--list", dest="show", action="store_true", help="list the session's changes by step"
    )


def _acp(parser: argparse.ArgumentParser) -> None:
    _backend_options(parser)
    _loop_options(parser)
    _sandbox_options(parser)


def _doctor(parser: argparse.ArgumentParser) -> None:
    _inspect(parser)
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also list the sandbox's names: never read or written, credentials, protected, "
        "sensitive",
    )


def _check_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help="the model to check (default: as `rune run`)")
    parser.add_argument("--backend", help=f"{_help('--backend')} ({_DEFAULT_BACKEND})")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help=_help("--timeout"))
    parser.add_argument(
        "--protocol",
        choices=PROTOCOL_CHOICES,
        help=_help("--protocol"),
    )
    parser.add_argument(
        "--max-iterations",
        type=int,
        metavar="N",
        help=f"{_help('--max-iterations')} (default 6)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line instead")


@dataclass(frozen=True)
class Command:
    """One ``rune`` command: its line in ``rune --help``, how its options are declared, and
    the module under :mod:`rune.cli.commands` whose ``command(args)`` carries it out."""

    help: str
    declare: Callable[[argparse.ArgumentParser], None]
    module: str


# The one registry. Only the chosen command's parser is built, and only its module imported:
# building all of them costs more than the rest of `rune --help` together.
COMMANDS: dict[str, Command] = {
    "run": Command("do one task in the workspace", _run, "run"),
    "demo": Command("fix a broken add() in a throw-away sample project", _demo, "demo"),
    "resume": Command("pick up a session (default: the latest pending one)", _resume, "resume"),
    "sessions": Command(
        "list sessions and their state; show, rm or prune them", _sessions, "sessions"
    ),
    "pull": Command("download a model Rune runs itself (none given: list them)", _pull, "pull"),
    "models": Command(
        "the server's models and the pulled ones: tools, context", _backend_options, "models"
    ),
    "doctor": Command("check the server, model, sandbox policy and containment", _doctor, "doctor"),
    "mcp": Command(
        "start your MCP servers: their state, tools and which ask first", _inspect, "mcp"
    ),
    "config": Command("show each effective setting and where it came from", _inspect, "config"),
    "tui": Command("the full-screen interface", _tui, "tui"),
    "undo": Command("take back a session's last file change (--all, --step N)", _undo, "undo"),
    "redo": Command("bring back what the last `rune undo` took back", _undo_session, "redo"),
    "acp": Command("serve an editor (Zed...) over the Agent Client Protocol on stdio", _acp, "acp"),
    "check-model": Command(
        "does a model work with Rune? a few small bugs, a verdict", _check_model, "check_model"
    ),
}
