"""``rune redo``: bring back what the last ``rune undo`` took back."""

from __future__ import annotations

import argparse

from rune.cli.commands.undo import carry_out


def command(args: argparse.Namespace) -> int:
    return carry_out(args, "redo")
