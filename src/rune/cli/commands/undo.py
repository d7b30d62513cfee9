"""``rune undo``: take back a session's file changes (``rune redo``, :mod:`rune.cli.commands.redo`,
brings them back; :mod:`rune.sessions.undo` does the work; this is the command line around it)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.text import Text

from rune.cli.consoles import err as _err
from rune.cli.consoles import out as _out
from rune.cli.exits import EXIT_FAILED, EXIT_OK
from rune.errors import ConfigError, UndoRefused
from rune.text import visible


def _workspace(args: argparse.Namespace) -> Path:
    workspace = Path(os.path.realpath(args.workspace or os.getcwd()))
    if not workspace.is_dir():
        raise ConfigError(f"the workspace {workspace} is not an existing directory")
    return workspace


def _session_id(args: argparse.Namespace, workspace: Path, action: str) -> str | None:
    """The session named, else the latest one of ``workspace`` with something to ``action``
    (a later session that changed nothing, a question, does not hide the last change), else
    its latest one, whose refusal says why."""
    from rune.app import session_store
    from rune.errors import SessionError
    from rune.sessions.changes import history

    if args.session:
        return str(args.session)
    store = session_store()
    here = [
        s.id
        for s in store.list()
        if s.workspace and Path(os.path.realpath(s.workspace)) == workspace
    ]
    for session_id in () if getattr(args, "show", False) else here:
        try:
            found = history(store.read(session_id).records)
        except SessionError:
            continue
        if found.undone if action == "redo" else found.latest_applied() is not None:
            return str(session_id)
    return str(here[0]) if here else None


def carry_out(args: argparse.Namespace, action: str) -> int:
    from rune.app import session_store
    from rune.sessions import undo as undoing

    workspace = _workspace(args)
    session_id = _session_id(args, workspace, action)
    if session_id is None:
        _err.print(Text(f"no session has worked in {visible(str(workspace), keep='')}"))
        return EXIT_FAILED
    with session_store().open(session_id) as session:
        try:
            if getattr(args, "show", False):
                lines = undoing.listing(session, workspace)
            elif action == "undo":
                lines = undoing.undo(session, workspace, step=args.step, every=args.every).lines()
            else:
                lines = undoing.redo(session, workspace).lines()
        except UndoRefused as refusal:
            _err.print(Text.assemble((f"✗ {action} refused: ", "bold red"), str(refusal)))
            return EXIT_FAILED
    for line in lines:
        _out.print(Text(line))
    return EXIT_OK


def command(args: argparse.Namespace) -> int:
    return carry_out(args, "undo")
