"""``rune run TASK``: one task in the workspace."""

from __future__ import annotations

import argparse

from rune.cli import consoles
from rune.cli.driving import drive, load_config, opened
from rune.cli.render import ConsoleReporter
from rune.cli.unstarted import refuse_a_spent_script

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    if args.json:
        from rune.cli.json_output import run_json

        return run_json(args, load_config)
    loaded = load_config(args)
    reporter = ConsoleReporter(out)
    with opened(loaded, reporter, session_id=args.session, title=args.task[:80]) as rune:
        if args.session:
            refuse_a_spent_script(rune)
        return drive(rune, reporter, lambda: rune.operator.send(args.task))[0]
