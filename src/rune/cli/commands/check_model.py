"""``rune check-model [MODEL]``: a few small bugs, a verdict (:mod:`rune.cli.check_model`)."""

from __future__ import annotations

import argparse

from rune.cli import consoles
from rune.cli.driving import load_config

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    from rune.cli.check_model import check_model

    return check_model(args, load_config(args), out, err)
