"""Rune as an Agent Client Protocol agent: each editor session is one of Rune's own sessions.

A session is opened with :func:`rune.app.open_rune`, exactly as ``rune run`` and ``rune tui``
open one, so its journal is the same: a session started in the editor resumes with ``rune
resume ID`` and a CLI session loads in the editor. The operator runs in a worker thread (it
blocks on the model); its events go to the editor as ``session/update`` notifications, in
order, through one queue per session. An approval the operator pauses on becomes a
``session/request_permission``; the editor's answer is turned into ``approve`` or ``reject``,
and the loop goes on until the turn ends.

``session/cancel`` stops the model call in flight (:meth:`WatchedTransport.stop`), kills a
running command (:mod:`rune.stop`), and rejects a change whose permission request is still
open; the turn then ends with ``cancelled`` and the journal keeps it up to its last step.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import threading
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, Client, RequestError, schema

from rune import __version__
from rune import events as ev
from rune.acp import updates
from rune.acp.inputs import (
    call_arguments,
    checked_cwd,
    client_mcp_servers,
    invalid,
    prompt_text,
)
from rune.acp.updates import Update
from rune.app import FILE_EDIT_TOOLS, Rune, auto_approves, open_rune
from rune.errors import (
    CallCancelled,
    ConfigError,
    RuneError,
    SessionLocked,
    SessionNotFound,
)
from rune.frontend.kept import kept_changes
from rune.messages import OperatorResponse, PendingApproval, ToolRequest
from rune.settings.config import ApprovalMode, LoadedConfig, McpServerConfig
from rune.stop import stoppable

#: what a cancelled approval tells the model
CANCELLED_REASON = "the user cancelled the turn"
ALLOW, ALLOW_SESSION, REJECT = "allow", "allow-session", "reject"

Loader = Callable[[Mapping[str, Any]], LoadedConfig]


class _Stopped:
    """The worker's result when the turn was stopped (the journal holds it to its last step)."""


STOPPED = _Stopped()
Result = OperatorResponse | RuneError | _Stopped | None


@dataclass
class LiveSession:
    """One session an editor has open: the agent, and what its current turn is doing."""

    rune: Rune
    stack: ExitStack
    mode: ApprovalMode
    queue: asyncio.Queue[Update | None] = field(default_factory=asyncio.Queue)
    stop: threading.Event = field(default_factory=threading.Event)
    busy: bool = False
    cancelled: bool = False
    #: whether the model's text reached the editor during the last operator call
    streamed: bool = False
    asking: asyncio.Future[Any] | None = None
    #: the tool calls started and not finished yet, oldest first: (ACP id, request)
    running: list[tuple[str, ToolRequest]] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    pump: asyncio.Task[None] | None = None

    @property
    def session_id(self) -> str:
        return self.rune.session_id

    def next_id(self) -> str:
        return f"call-{next(self.ids)}"

    def call_for(self, pending: PendingApproval) -> tuple[str, bool]:
        """The tool call a pending change belongs to, and whether it is new to the editor (a
        change a reopened session was already waiting on)."""
        for call_id, request in self.running:
            if request.name == pending.name and dict(request.arguments) == dict(pending.arguments):
                return call_id, False
        call_id = self.next_id()
        self.running.append((call_id, ToolRequest(pending.name, dict(pending.arguments))))
        return call_id, True

    def finish(self, name: str, arguments: Mapping[str, Any]) -> str | None:
        for index, (call_id, request) in enumerate(self.running):
            if request.name == name and dict(request.arguments) == dict(arguments):
                del self.running[index]
                return call_id
        for index, (call_id, request) in enumerate(self.running):
            if request.name == name:
                del self.running[index]
                return call_id
        return None


def _failed(err: RuneError) -> RequestError:
    return RequestError(-32603, f"{err.kind}: {err}")


def permission_options(pending: PendingApproval) -> list[schema.PermissionOption]:
    """Allow once, allow for the session, reject. "For the session" is Rune's own rule: a file
    edit turns on what ``--yes`` approves, a command what ``--yes --yes`` approves; a sensitive
    change has no such option, since no rule ever approves it unasked."""
    options = [schema.PermissionOption(option_id=ALLOW, name="Allow", kind="allow_once")]
    if pending.sensitive is None:
        name = (
            "Allow file edits in the workspace for this session (like --yes)"
            if pending.name in FILE_EDIT_TOOLS
            else "Allow every command and change for this session (like --yes --yes)"
        )
        options.append(
            schema.PermissionOption(option_id=ALLOW_SESSION, name=name, kind="allow_always")
        )
    options.append(schema.PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"))
    return options


class RuneAgent:
    """The ``acp`` Agent: initialize, session/new, session/load, session/prompt,
    session/cancel."""

    def __init__(self, load: Loader) -> None:
        self._load = load
        self._client: Client | None = None
        self._sessions: dict[str, LiveSession] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    # --- the protocol ------------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **_: Any,
    ) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                mcp_capabilities=schema.McpCapabilities(http=False, sse=False),
            ),
            auth_methods=[],
            agent_info=schema.Implementation(name="rune", title="Rune", version=__version__),
        )

    async def authenticate(self, method_id: str, **_: Any) -> None:
        raise RequestError.invalid_params({"details": "Rune needs no authentication"})

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **_: Any
    ) -> schema.NewSessionResponse:
        workspace = checked_cwd(cwd)
        live = await self._open(workspace, None, client_mcp_servers(mcp_servers))
        return schema.NewSessionResponse(session_id=live.session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **_: Any
    ) -> schema.LoadSessionResponse:
        workspace = checked_cwd(cwd)
        servers = client_mcp_servers(mcp_servers)
        live = self._sessions.get(session_id) or await self._open(workspace, session_id, servers)
        if live.rune.workspace != workspace:  # (open already refused a session it opened)
            raise invalid(self._elsewhere(live, workspace))
        await self._replay(live)
        return schema.LoadSessionResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> schema.PromptResponse:
        live = self._live(session_id)
        if live.busy:
            raise RequestError.invalid_request(
                {"details": "this session is already working on a prompt; cancel it first"}
            )
        text = prompt_text(prompt)
        operator = live.rune.operator
        live.busy, live.cancelled = True, False
        live.stop.clear()
        live.rune.transport.allow()
        try:
            if operator.pending is not None:
                # A change this session was waiting on comes first; then the new message.
                earlier = await self._settle(live, await self._call(live, operator.resume))
                if live.cancelled or not isinstance(earlier, OperatorResponse):
                    return await self._end(live, earlier)
                await self._show_answer(live, earlier)
            result = await self._call(live, lambda: operator.send(text))
            return await self._end(live, await self._settle(live, result))
        finally:
            await live.queue.join()
            live.busy = False

    async def cancel(self, session_id: str, **_: Any) -> None:
        live = self._sessions.get(session_id)
        if live is None or not live.busy:
            return
        live.cancelled = True
        live.stop.set()
        live.rune.transport.stop()
        if live.asking is not None:
            live.asking.cancel()

    # --- sessions ----------------------------------------------------------------------------

    def _live(self, session_id: Any) -> LiveSession:
        live = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if live is None:
            raise invalid(f"no open session {session_id!r}: session/new or session/load first")
        return live

    async def _open(
        self, workspace: Path, session_id: str | None, servers: tuple[McpServerConfig, ...]
    ) -> LiveSession:
        """Open a new session in ``workspace``, or reopen ``session_id``, which must work
        there (its recorded workspace is kept, as ``rune resume`` keeps it)."""
        try:
            loaded = self._load({"workspace": str(workspace)} if session_id is None else {})
        except ConfigError as err:
            raise invalid(str(err)) from None
        # A server of the user's own config wins over the editor's of the same name.
        configured = {server.name for server in loaded.mcp_servers}
        extra = tuple(server for server in servers if server.name not in configured)
        loaded = dataclasses.replace(loaded, mcp_servers=(*loaded.mcp_servers, *extra))
        stack = ExitStack()
        try:
            rune = await asyncio.to_thread(
                stack.enter_context, open_rune(loaded, session_id=session_id, title="editor")
            )
        except (SessionNotFound, ConfigError) as err:
            raise invalid(str(err)) from None
        except SessionLocked as err:
            raise RequestError.invalid_request({"details": str(err)}) from None
        except RuneError as err:
            raise _failed(err) from None
        live = LiveSession(rune, stack, mode=loaded.settings.approval)
        if rune.workspace != workspace:
            await asyncio.to_thread(stack.close)
            raise invalid(self._elsewhere(live, workspace))
        self._loop = asyncio.get_running_loop()
        rune.relay.target = self._sink(live)
        live.pump = asyncio.create_task(self._pump(live))
        self._sessions[rune.session_id] = live
        for warning in rune.startup_warnings():
            self._post(live, updates.message(f"warning: {warning}\n"))
        return live

    @staticmethod
    def _elsewhere(live: LiveSession, workspace: Path) -> str:
        return f"session {live.session_id} works in {live.rune.workspace}, not in {workspace}"

    async def close_all(self) -> None:
        """Stop every turn and close every session (the client went away)."""
        for live in list(self._sessions.values()):
            live.stop.set()
            live.rune.transport.stop()
            if live.pump is not None:
                live.pump.cancel()
            await asyncio.to_thread(live.stack.close)
        self._sessions.clear()

    async def _replay(self, live: LiveSession) -> None:
        """The conversation so far, as the updates it would have made (ACP's session/load)."""
        operator: Any = live.rune.operator
        history: list[dict[str, Any]] = list(getattr(operator, "history", []))
        starts = set(getattr(operator, "turn_starts", []))
        for index, message in enumerate(history):
            content = str(message.get("content") or "")
            role = message.get("role")
            if role == "user" and index in starts:
                self._post(live, updates.user_message(content))
            elif role == "assistant":
                if content.strip():
                    self._post(live, updates.message(content))
                for call in message.get("tool_calls") or ():
                    function = call.get("function") or {}
                    request = ToolRequest(
                        str(function.get("name") or "tool"),
                        call_arguments(function.get("arguments")),
                    )
                    start = updates.started(live.next_id(), request)
                    self._post(live, start.model_copy(update={"status": "completed"}))
        pending = operator.pending
        if pending is not None:
            self._post(
                live,
                updates.message(
                    f"This session waits for your approval of: {pending.summary}. "
                    "Your next message asks for it first.\n"
                ),
            )
        await live.queue.join()

    # --- driving the operator ----------------------------------------------------------------

    async def _call(self, live: LiveSession, operation: Callable[[], Any]) -> Result:
        """One operator call in a worker thread; a stop or a Rune error is a result too."""
        live.streamed = False

        def work() -> Result:
            with stoppable(live.stop):
                try:
                    response: OperatorResponse | None = operation()
                    return response
                except CallCancelled:
                    # The journal holds the turn up to its last checkpoint: take it from there.
                    live.rune.operator.reload()
                    return STOPPED
                except RuneError as err:
                    return err

        return await asyncio.to_thread(work)

    async def _settle(self, live: LiveSession, result: Result) -> Result:
        """Answer each approval the turn pauses on, until it ends."""
        operator = live.rune.operator
        while isinstance(result, OperatorResponse) and result.pending is not None:
            pending = result.pending
            call_id, new = live.call_for(pending)
            if new:
                request = ToolRequest(pending.name, dict(pending.arguments))
                self._post(live, updates.started(call_id, request))
            self._post(live, updates.waiting_update(call_id, pending))
            if live.cancelled:
                approve = False
            elif auto_approves(live.mode, pending):
                approve = True
            else:
                approve = await self._ask(live, call_id, pending)
            if approve:
                self._post(live, updates.applying(call_id))
                result = await self._call(live, operator.approve)
            else:
                reason = CANCELLED_REASON if live.cancelled else "rejected in the editor"
                result = await self._call(live, functools.partial(operator.reject, reason))
        return result

    async def _ask(self, live: LiveSession, call_id: str, pending: PendingApproval) -> bool:
        """Ask the editor; True to apply. No answer, or an answer Rune cannot read, rejects."""
        assert self._client is not None
        await live.queue.join()  # the editor has the tool call before it is asked about it
        asking = asyncio.ensure_future(
            self._client.request_permission(
                session_id=live.session_id,
                tool_call=updates.waiting(call_id, pending),
                options=permission_options(pending),
            )
        )
        live.asking = asking
        try:
            reply = await asking
        except asyncio.CancelledError:
            if not live.cancelled:
                raise
            return False
        except Exception:  # the client failed to answer: nothing is applied
            return False
        finally:
            live.asking = None
        outcome = reply.outcome
        if isinstance(outcome, schema.DeniedOutcome):
            live.cancelled = True
            return False
        if outcome.option_id == ALLOW_SESSION and pending.sensitive is None:
            live.mode = "edits" if pending.name in FILE_EDIT_TOOLS else "all"
            return True
        return outcome.option_id == ALLOW

    async def _show_answer(self, live: LiveSession, response: OperatorResponse) -> None:
        if response.success and response.text and not live.streamed:
            self._post(live, updates.message(response.text))
        if response.incomplete:
            self._post(
                live, updates.message(f"\n\n(answered, but not finished: {response.incomplete})")
            )
        elif not response.success and response.pending is None:
            self._post(live, updates.message(f"\n\n{response.error_kind}: {response.error}"))
        # an editor has no working directory of its own: the command names the workspace
        kept = kept_changes(live.rune, response, cwd=None)
        if kept is not None:
            self._post(live, updates.message(f"\n\n({kept})"))

    async def _end(self, live: LiveSession, result: Result) -> schema.PromptResponse:
        if isinstance(result, _Stopped) or live.cancelled:
            return schema.PromptResponse(stop_reason="cancelled")
        if isinstance(result, RuneError):
            raise _failed(result)
        if result is None:
            return schema.PromptResponse(stop_reason="end_turn")
        await self._show_answer(live, result)
        if result.outcome == "limit":
            return schema.PromptResponse(stop_reason="max_turn_requests")
        return schema.PromptResponse(stop_reason="end_turn")

    # --- updates -----------------------------------------------------------------------------

    def _sink(self, live: LiveSession) -> ev.EventSink:
        """The operator's events (from its worker thread) as updates for the editor."""

        def sink(event: ev.LoopEvent) -> None:
            match event:
                case ev.TextDelta(text=text):
                    live.streamed = True
                    self._post(live, updates.message(text))
                case ev.ThinkingDelta(text=text):
                    self._post(live, updates.thought(text))
                case ev.ToolStarted(request=request):
                    call_id = live.next_id()
                    live.running.append((call_id, request))
                    self._post(live, updates.started(call_id, request))
                case ev.ToolFinished(event=done) if done.status != "pending_approval":
                    found = live.finish(done.name, done.arguments)
                    if found is not None:
                        self._post(live, updates.finished(found, done))
                case ev.Warning(message=text):
                    self._post(live, updates.message(f"\nwarning: {text}\n"))
                case ev.FallbackPromptInjected() as injected:
                    self._post(live, updates.thought(injected.describe()))
                case _:
                    pass

        return sink

    def _post(self, live: LiveSession, update: Update) -> None:
        """Queue ``update`` for the editor, from any thread, in order."""
        loop = self._loop
        if loop is None:
            return
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is loop:
            live.queue.put_nowait(update)  # at once, so a join() right after waits for it
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens any more
            loop.call_soon_threadsafe(live.queue.put_nowait, update)

    async def _pump(self, live: LiveSession) -> None:
        while True:
            update = await live.queue.get()
            try:
                if update is not None and self._client is not None:
                    await self._client.session_update(session_id=live.session_id, update=update)
            except Exception:  # the client is gone or refused it: the turn goes on regardless
                pass
            finally:
                live.queue.task_done()
