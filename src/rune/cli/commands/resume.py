"""``rune resume [ID]``: pick up a session."""

from __future__ import annotations

import argparse

from rune.cli import consoles
from rune.cli.driving import drive, load_config, opened
from rune.cli.exits import (
    EXIT_FAILED,
    EXIT_OK,
)
from rune.cli.render import ConsoleReporter
from rune.cli.unstarted import refuse_a_spent_script
from rune.messages import OperatorResponse

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    from rune.app import session_store

    store = session_store()
    latest = store.latest("pending approval") or store.latest()
    session_id = args.session or (latest.id if latest is not None else None)
    if session_id is None:
        out.print('no session to resume; start one with `rune run "TASK"`')
        return EXIT_FAILED
    loaded = load_config(args)
    reporter = ConsoleReporter(out)
    with opened(loaded, reporter, session_id=session_id) as rune:
        operator = rune.operator
        assert operator.session is not None  # opened by its id
        status = operator.session.status

        def start() -> OperatorResponse | None:
            # A fresh budget from the last journaled point: after the budget ran out, an
            # unfinished answer, or a failure that may have been passing (a server error).
            again = args.again or status == "failed"
            if again:
                refuse_a_spent_script(rune)
            response: OperatorResponse | None = operator.retry() if again else operator.resume()
            return response

        code, response = drive(rune, reporter, start)
    if response is None and code == EXIT_OK:
        hint = f'`rune run --session {session_id} "TASK"` gives it a new task'
        if status in ("iteration limit", "incomplete") and not args.again:
            hint = f"`rune resume {session_id} --continue` runs on with a fresh budget, or {hint}"
        out.print(f"nothing to pick up: the session is {status}; {hint}")
    return code
