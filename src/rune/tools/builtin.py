"""The built-in tool set, in the order the model sees it."""

from __future__ import annotations

from rune.tools.base import BuiltinTool, ToolContext
from rune.tools.checks import RUN_PYTHON
from rune.tools.commands import RUN_COMMAND
from rune.tools.files import EDIT_FILE, LIST_DIR, READ_FILE, REPLACE_FUNCTION, WRITE_FILE
from rune.tools.formatting import FORMAT_CODE
from rune.tools.search import SEARCH
from rune.tools.testing import RUN_TESTS

__all__ = ["BUILTIN_TOOLS", "BuiltinTool", "ToolContext"]

BUILTIN_TOOLS: tuple[BuiltinTool, ...] = (
    READ_FILE,
    LIST_DIR,
    SEARCH,
    REPLACE_FUNCTION,
    EDIT_FILE,
    WRITE_FILE,
    FORMAT_CODE,
    RUN_PYTHON,
    RUN_TESTS,
    RUN_COMMAND,
)
