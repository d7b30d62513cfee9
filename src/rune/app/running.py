"""The running agent: :func:`open_rune` turns the settings into a :class:`Rune` (transport,
session, MCP servers, operator) and owns their shutdown (an embedded server stops on exit,
Ctrl-C or error)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rune import events as ev
from rune.app.backend import BackendChoice, choose_backend, settings_from_header
from rune.app.build import build_operator, tests_left_unrun
from rune.app.policy import sandbox_policy, workspace_unwritable
from rune.app.servers import capabilities, open_transport
from rune.errors import ConfigError
from rune.grants import Grant
from rune.messages import OperatorResponse, PendingApproval
from rune.settings.config import LoadedConfig, McpServerConfig, Settings
from rune.transport.base import Capabilities, Transport
from rune.transport.repetition import RepetitionGuard
from rune.transport.watch import WatchedTransport

if TYPE_CHECKING:
    from rune.sessions.store import Session, SessionStore
    from rune.tools.mcp.client import McpManager


class Driver(Protocol):
    """What the edges drive: ``rune.operator.RuneOperator``."""

    #: the session it journals to (None: an operator that keeps none)
    session: Session | None

    @property
    def pending(self) -> PendingApproval | None: ...

    def send(self, text: str) -> OperatorResponse: ...

    def resume(self) -> OperatorResponse | None: ...

    def approve(self) -> OperatorResponse: ...

    def reject(self, reason: str = "") -> OperatorResponse: ...

    def allow(self, grant: Grant) -> None: ...

    def granted(self, pending: PendingApproval) -> Grant | None: ...

    def retry(self) -> OperatorResponse | None: ...

    def reload(self) -> None: ...


@dataclass
class EventRelay:
    """The operator's ``on_event``; an edge plugs its own sink in after the operator exists."""

    target: ev.EventSink = ev.ignore

    def __call__(self, event: ev.LoopEvent) -> None:
        self.target(event)


@dataclass
class Rune:
    """One agent ready to drive: what the CLI and TUI hold."""

    settings: Settings
    backend: BackendChoice
    transport: WatchedTransport
    model: str
    capabilities: Capabilities
    operator: Driver
    session_id: str
    relay: EventRelay = field(default_factory=EventRelay)
    #: the MCP servers' manager (None without servers): ``problems()`` for the user
    mcp: McpManager | None = None
    #: why Rune chose the model itself (no model was named), else None
    picked: str | None = None
    #: what the run will go without, said before the first turn (tests it cannot run here)
    shortfalls: tuple[str, ...] = ()

    @property
    def budget(self) -> int:
        return self.settings.max_iterations

    def startup_warnings(self) -> list[str]:
        """What the user should hear before the first turn: each MCP server that failed to
        start, each tool a server listed that Rune left out, a workspace no change can be
        written in, tests in the workspace that Rune cannot run here (one line each)."""
        problems = list(self.mcp.problems()) if self.mcp is not None else []
        return [*self.shortfalls, *problems]

    @property
    def workspace(self) -> Path:
        return Path(os.path.realpath(self.settings.workspace))


@dataclass(frozen=True)
class Opening:
    """What is known before the server is asked anything: enough for the first line."""

    model: str
    backend: BackendChoice
    picked: str | None
    session_id: str | None


def session_store() -> SessionStore:
    from rune.sessions import SessionStore

    return SessionStore()


def check_workspace(settings: Settings) -> Path:
    """The workspace, resolved; a ConfigError when it is not an existing directory."""
    workspace = Path(os.path.realpath(settings.workspace))
    if not workspace.exists():
        raise ConfigError(f"the workspace {workspace} does not exist; create it or pick another")
    if not workspace.is_dir():
        raise ConfigError(f"the workspace {workspace} is not a directory")
    return workspace


def picked_by_rune(settings: Settings, choice: BackendChoice) -> str | None:
    """Why Rune chose the model itself, when the user named none."""
    if choice.kind == "embedded":
        return None if settings.model or settings.embedded_model else choice.reason
    if choice.kind in ("ollama", "openai") and not settings.model:
        return (
            "no model named, so the first tool-capable one the server lists; --model NAME chooses"
        )
    return None


def watched_transport(inner: Transport, on_event: ev.EventSink) -> WatchedTransport:
    """The transport a run talks to: watched (progress, stop, each call's cost) around a guard
    that stops a reply repeating itself (:mod:`rune.transport.repetition`)."""
    return WatchedTransport(RepetitionGuard(inner), on_event=on_event)


@contextmanager
def open_rune(
    loaded: LoadedConfig,
    *,
    session_id: str | None = None,
    title: str = "",
    announce: Callable[[Opening], None] | None = None,
    status: Callable[[str], None] | None = None,
    can_ask: bool = False,
) -> Iterator[Rune]:
    """Build the agent for a new session (or reopen ``session_id``); close all on exit.

    ``can_ask``: someone at a terminal can approve a read outside the workspace (else such a
    read is refused with a message the model reads, and the run goes on).

    ``announce`` hears the model and backend as soon as they are chosen, before the server is
    asked anything (which may hang until the read timeout); ``status`` hears each slow step
    as it starts ("starting the embedded server", "asking the server about the model").
    """
    settings = loaded.settings
    store = session_store()
    say = status or (lambda _text: None)
    with ExitStack() as stack:
        session = None
        if session_id is not None:
            session = store.open(session_id)
            stack.callback(_close, session)
            settings = _settings_for_session(loaded, session)
        workspace = check_workspace(settings)
        choice = choose_backend(settings)
        if choice.kind == "embedded":
            say(f"starting the embedded llama.cpp server with {choice.model_path}")
        elif choice.kind in ("ollama", "openai") and not settings.model:
            say(f"asking {choice.label} which models it serves")
        replayed = _assistant_turns(session) if session is not None else 0
        relay = EventRelay()
        inner, model = open_transport(choice, settings, stack, replayed=replayed)
        transport = watched_transport(inner, relay)
        picked = picked_by_rune(settings, choice)
        if announce is not None:
            announce(Opening(model, choice, picked, session.id if session else None))
        say(f"asking {choice.label} about {model}")
        caps = capabilities(transport, model)
        if session is None:
            session = store.create(
                model=model,
                workspace=str(workspace),
                backend=choice.header,
                title=title,
            )
            stack.callback(_close, session)
        if loaded.mcp_servers:
            say("starting the MCP servers")
        manager = stack.enter_context(mcp_servers(loaded.mcp_servers, settings))
        operator = build_operator(
            settings,
            choice,
            transport,
            model,
            session=session,
            on_event=relay,
            mcp=manager,
            can_ask=can_ask,
        )
        shortfalls = (
            workspace_unwritable(workspace),
            tests_left_unrun(settings, operator.executor, workspace),
        )
        yield Rune(
            settings,
            choice,
            transport,
            model,
            caps,
            operator,
            session.id,
            relay,
            manager,
            picked=picked,
            shortfalls=tuple(s for s in shortfalls if s),
        )


@contextmanager
def mcp_servers(
    servers: tuple[McpServerConfig, ...], settings: Settings
) -> Iterator[McpManager | None]:
    """The user's MCP servers, started (each ready or failed) and stopped on exit; None when
    there are none (the SDK is then never imported)."""
    if not servers:
        yield None
        return
    from rune.tools.mcp.client import McpManager

    with McpManager(
        servers, workspace=settings.workspace, policy=sandbox_policy(settings)
    ) as manager:
        yield manager


def _assistant_turns(session: Session) -> int:
    return sum(1 for m in session.messages if m.get("role") == "assistant")


def _close(session: Session) -> None:
    session.close()


def _settings_for_session(loaded: LoadedConfig, session: Session) -> Settings:
    """A resumed session keeps its model, backend and workspace unless a flag says otherwise."""
    recorded: dict[str, object] = {}
    meta = session.meta
    flagged = {k for k, src in loaded.sources.items() if src.startswith("flag")}
    if "model" not in flagged:
        recorded["model"] = meta.get("model") or None
    if "workspace" not in flagged and meta.get("workspace"):
        recorded["workspace"] = Path(meta["workspace"])
    if "backend" not in flagged:
        recorded.update(settings_from_header(str(meta.get("backend") or "")))
    return loaded.settings.model_copy(update=recorded)
