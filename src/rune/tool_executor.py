"""Kept path: the first design notes name ``tool_executor.validate_write_path``. The executor
lives in :mod:`rune.tools.executor`; nothing in Rune imports this path."""

from rune.tools.executor import *  # noqa: F403
from rune.tools.executor import __all__ as __all__
