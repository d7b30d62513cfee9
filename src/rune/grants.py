"""What a person allowed for the rest of a session: commands that begin with an exact argv
prefix (``python -m pytest``), or every file edit inside the workspace.

A grant is offered from the approval it was asked at, journaled when given, and read back when
the session is resumed. It never covers a sensitive change (outside the workspace, a file that
steers an agent or runs code), and a command is matched only when it is one plain command:
any shell operator, substitution or redirection (``;``, ``&&``, ``|``, ``$(…)``, ``>``) and it is
asked for again, so ``python -m pytest; curl …`` never rides on a ``python -m pytest`` grant.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rune.messages import PendingApproval

FILE_EDIT_TOOLS = frozenset({"write_file", "edit_file", "replace_function", "format_code"})
GrantKind = Literal["command", "edits"]
#: a command with any of these is not one plain command; no grant covers it
_SHELL_SYNTAX = re.compile(r"[;&|<>$`(){}\n\r\\*?\[\]~!#]")
#: an argument that names a subcommand (``git status``, ``npm test``), not a file or an option
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9_-]*$")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
#: programs that run whatever their arguments say: a grant never stops at the program alone
RUNS_ANYTHING = frozenset(
    {"bash", "sh", "zsh", "dash", "fish", "env", "sudo", "doas", "xargs", "node", "perl",
     "ruby", "php", "deno", "bun", "nohup", "timeout", "nice", "exec", "eval", "command"}
)  # fmt: skip


@dataclass(frozen=True)
class Grant:
    kind: GrantKind
    prefix: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind == "edits":
            return "file edits in the workspace"
        return f"commands that begin `{shlex.join(self.prefix)}`"

    def covers(self, pending: PendingApproval) -> bool:
        if pending.sensitive is not None:
            return False
        if self.kind == "edits":
            return pending.name in FILE_EDIT_TOOLS
        argv = plain_argv(pending)
        return argv is not None and tuple(argv[: len(self.prefix)]) == self.prefix

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "prefix": list(self.prefix)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Grant | None:
        """The grant a journal record holds; None when it is not one (a damaged record)."""
        kind, prefix = data.get("kind"), data.get("prefix", [])
        if not isinstance(prefix, list) or not all(isinstance(p, str) for p in prefix):
            return None
        if kind == "edits" and not prefix:
            return cls("edits")
        if kind == "command" and prefix:
            return cls("command", tuple(prefix))
        return None


def plain_argv(pending: PendingApproval) -> list[str] | None:
    """The argv of a ``run_command`` that is one plain command, else None."""
    if pending.name != "run_command":
        return None
    command = pending.arguments.get("command")
    return plain_command_argv(command) if isinstance(command, str) else None


def plain_command_argv(command: str) -> list[str] | None:
    """The argv of ``command`` when it is one plain command (no shell operator, substitution,
    redirection or glob), else None."""
    if _SHELL_SYNTAX.search(command):
        return None
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    return argv or None


def offer(pending: PendingApproval) -> Grant | None:
    """The grant an approval may offer, or None (a sensitive change, a compound command)."""
    if pending.sensitive is not None:
        return None
    if pending.name in FILE_EDIT_TOOLS:
        return Grant("edits")
    argv = plain_argv(pending)
    if argv is None:
        return None
    program = argv[0].rpartition("/")[2]
    if _PYTHON.match(program) and argv[1:2] == ["-m"] and len(argv) > 2:
        return Grant("command", tuple(argv[:3]))  # python -m pytest
    if program in RUNS_ANYTHING or _PYTHON.match(program):
        # `python3` alone would allow every script: only `python3 this_script.py`.
        if len(argv) > 1 and not argv[1].startswith("-"):
            return Grant("command", tuple(argv[:2]))
        return None
    if len(argv) > 1 and _SUBCOMMAND.match(argv[1]):
        return Grant("command", tuple(argv[:2]))  # git status, npm test
    return Grant("command", tuple(argv[:1]))
