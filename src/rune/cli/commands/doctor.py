"""``rune doctor``: the server, model, sandbox policy and containment (:mod:`rune.cli.doctor`)."""

from __future__ import annotations

import argparse

from rune.cli import consoles
from rune.cli.driving import load_config

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    from rune.cli.doctor import run_doctor

    return run_doctor(load_config(args), out, verbose=args.verbose)
