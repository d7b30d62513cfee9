"""``rune sessions``: list, show, rm or prune sessions."""

from __future__ import annotations

import argparse

from rune.cli import consoles
from rune.cli.exits import (
    EXIT_OK,
    EXIT_USAGE,
)
from rune.text import plural

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from rune.app import session_store

    store = session_store()
    if args.action == "show":
        if len(args.ids) != 1:
            err.print("usage: rune sessions show ID")
            return EXIT_USAGE
        from rune.cli.show import show_session

        show_session(store, args.ids[0], out, err)
        return EXIT_OK
    if args.action == "rm":
        if not args.ids:
            err.print("usage: rune sessions rm ID [ID...]")
            return EXIT_USAGE
        for session_id in args.ids:
            store.remove(session_id)
            out.print(f"removed {session_id}")
        return EXIT_OK
    if args.ids:
        err.print(f"rune sessions {args.action} takes no session id")
        return EXIT_USAGE
    if args.action == "prune":
        if args.days < 0:
            err.print("--days is a number of days, 0 or more")
            return EXIT_USAGE
        removed, busy = store.prune(timedelta(days=args.days))
        for session_id in busy:
            out.print(f"kept {session_id}: a process is using it")
        out.print(f"removed {plural(len(removed), 'session')}")
        return EXIT_OK
    from rune.cli.listing import list_sessions

    return list_sessions()
