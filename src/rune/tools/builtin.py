"""The built-in tool set, in the order the model sees it."""

from __future__ import annotations

from rune.tools.base import BuiltinTool, ToolContext
from rune.tools.commands import RUN_COMMAND
from rune.tools.files import EDIT_FILE, LIST_DIR, READ_FILE, WRITE_FILE
from rune.tools.formatting import FORMAT_CODE
from rune.tools.search import SEARCH

__all__ = ["BUILTIN_TOOLS", "BuiltinTool", "ToolContext"]

BUILTIN_TOOLS: tuple[BuiltinTool, ...] = (
    READ_FILE,
    LIST_DIR,
    SEARCH,
    WRITE_FILE,
    EDIT_FILE,
    FORMAT_CODE,
    RUN_COMMAND,
)
