"""Kept path: the first design notes name ``rune/local_tool_runtime.py``. The loop lives in
:mod:`rune.runtime` (this module's code is :mod:`rune.runtime.local_tool_runtime`); nothing in
Rune imports this path."""

from rune.runtime.local_tool_runtime import *  # noqa: F403
from rune.runtime.local_tool_runtime import __all__ as __all__
