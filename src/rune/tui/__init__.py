"""``rune tui``: the Textual interface (imports Textual; load it only for that command)."""

from rune.tui.app import RuneApp

__all__ = ["RuneApp"]
