"""Rune: a local-first coding agent built around a safe, capped tool loop.

The public names below are imported lazily so that ``rune --help`` stays fast.
"""

from __future__ import annotations

# Not `from typing import TYPE_CHECKING`: importing typing costs every `rune` start-up.
TYPE_CHECKING = False

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "ToolRequest": "rune.messages",
    "ToolEvent": "rune.messages",
    "OperatorResponse": "rune.messages",
    "PendingApproval": "rune.messages",
    "PendingState": "rune.pause.state",
    "ChatResult": "rune.messages",
    "LocalToolRuntime": "rune.runtime.local_tool_runtime",
    "Transport": "rune.transport.base",
    "ScriptedTransport": "rune.transport.scripted",
    "OllamaChatTransport": "rune.transport.ollama",
    "OpenAICompatTransport": "rune.transport.openai_compat",
    "ToolExecutor": "rune.tools.executor",
    "SandboxPolicy": "rune.tools.sandbox",
    "ToolSpec": "rune.tools.spec",
    "PreparedChange": "rune.tools.spec",
    "RuneOperator": "rune.operator",
    "RuneError": "rune.errors",
    "Capabilities": "rune.transport.base",
    "SessionStore": "rune.sessions",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rune' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from rune.errors import RuneError
    from rune.messages import ChatResult, OperatorResponse, PendingApproval, ToolEvent, ToolRequest
    from rune.operator import RuneOperator
    from rune.pause.state import PendingState
    from rune.runtime.local_tool_runtime import LocalToolRuntime
    from rune.sessions import SessionStore
    from rune.tools.executor import ToolExecutor
    from rune.tools.sandbox import SandboxPolicy
    from rune.tools.spec import PreparedChange, ToolSpec
    from rune.transport.base import Capabilities, Transport
    from rune.transport.ollama import OllamaChatTransport
    from rune.transport.openai_compat import OpenAICompatTransport
    from rune.transport.scripted import ScriptedTransport
