"""The composition root: the only package that picks concrete classes.

It turns :class:`rune.settings.config.Settings` into a running agent: which backend
(:mod:`rune.app.backend`, a tagged union), the transport that reaches it
(:mod:`rune.app.servers`), the sandbox and approval policy (:mod:`rune.app.policy`, pure
functions of the settings), the operator (:mod:`rune.app.build`), and the session and its
shutdown (:mod:`rune.app.running`). The CLI and the TUI get a :class:`Rune` from
:func:`open_rune` and never build clients themselves.
"""

from __future__ import annotations

from rune.app.backend import (
    DEMO_MODEL_MAX_OUTPUT_TOKENS,
    DEMO_MODEL_NOTICE,
    DEMO_RANK,
    EMBEDDED_CONTEXT,
    NO_BACKEND_HELP,
    OLLAMA_PROBE_SECONDS,
    PULL_HINT,
    RECOMMENDED_MODEL,
    BackendChoice,
    BackendKind,
    EmbeddedBackend,
    OllamaBackend,
    OpenAIBackend,
    ScriptedBackend,
    choose_backend,
    no_backend_help,
    ollama_answers,
    ollama_host,
    settings_from_header,
)
from rune.app.build import assists_for, build_operator, protocol_for
from rune.app.policy import (
    auto_approves,
    commands_contained,
    contained_environment_report,
    policy_report,
    python_library_dirs,
    sandbox_policy,
    workspace_unwritable,
)
from rune.app.running import (
    Driver,
    EventRelay,
    Opening,
    Rune,
    check_workspace,
    mcp_servers,
    open_rune,
    picked_by_rune,
    session_store,
    watched_transport,
)
from rune.app.servers import capabilities, open_transport, script_spent
from rune.grants import FILE_EDIT_TOOLS
from rune.transport.base import DEFAULT_WINDOW

__all__ = [
    "DEFAULT_WINDOW",
    "DEMO_MODEL_MAX_OUTPUT_TOKENS",
    "DEMO_MODEL_NOTICE",
    "DEMO_RANK",
    "EMBEDDED_CONTEXT",
    "FILE_EDIT_TOOLS",
    "NO_BACKEND_HELP",
    "OLLAMA_PROBE_SECONDS",
    "PULL_HINT",
    "RECOMMENDED_MODEL",
    "BackendChoice",
    "BackendKind",
    "Driver",
    "EmbeddedBackend",
    "EventRelay",
    "OllamaBackend",
    "OpenAIBackend",
    "Opening",
    "Rune",
    "ScriptedBackend",
    "assists_for",
    "auto_approves",
    "build_operator",
    "capabilities",
    "check_workspace",
    "choose_backend",
    "commands_contained",
    "contained_environment_report",
    "mcp_servers",
    "no_backend_help",
    "ollama_answers",
    "ollama_host",
    "open_rune",
    "open_transport",
    "picked_by_rune",
    "policy_report",
    "protocol_for",
    "python_library_dirs",
    "sandbox_policy",
    "script_spent",
    "session_store",
    "settings_from_header",
    "watched_transport",
    "workspace_unwritable",
]
