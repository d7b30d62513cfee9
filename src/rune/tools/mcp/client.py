"""``McpManager``: the user's MCP servers, connected through the official ``mcp`` SDK.

The SDK is asynchronous (anyio) and Rune's loop is not: the manager owns one event loop on a
background thread, where each server's session lives in its own task from start to stop (the
SDK's transports must be entered and left in one task). A call from the loop is a coroutine
scheduled on that thread and waited for with the server's ``call_timeout``.

A stdio server starts with the allow-listed environment of commands
(:func:`rune.tools.containment.contained_environment`; the ``env`` of its config is added on
top, since the user wrote it) and, where bubblewrap works, inside the same sandbox commands get
(:func:`rune.tools.commands.bwrap_argv`, with the limits of an approved command): no network
unless ``network = true``; only the system directories, its ``cwd``, its own program's
installation (:mod:`rune.tools.runtime_dirs`) and ``sandbox.contained_reads`` visible, home
private and empty; its ``cwd`` writable only with ``writable = true``. Its stderr goes to a
temporary file, whose last lines explain a failed start. Every server is stopped with the
manager (``close``): the SDK closes its stdin, then terminates its process group;
inside bubblewrap the PID namespace dies with it.

Faults stay local: a server that fails to start is listed as failed and offers no tools; a
crash, a timeout, an error result or content Rune cannot read is a :class:`McpError` (a tool
error the model reads) for that call; the other servers go on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Literal

from rune.distribution import extra_install_hint
from rune.errors import McpError, ToolError
from rune.settings.config import McpServerConfig
from rune.text import escape_hidden, hidden_note, visible
from rune.tools.base import ToolContext
from rune.tools.commands import bwrap_argv, containment, seccomp_works
from rune.tools.containment import contained_environment, plan_mounts
from rune.tools.mcp.launch import PLACEHOLDER
from rune.tools.mcp.listing import McpTool, accept_tools
from rune.tools.run_limits import COMMAND, RunCgroup, launcher, open_cgroup
from rune.tools.runtime_dirs import runtime_dirs
from rune.tools.sandbox import SandboxPolicy

State = Literal["starting", "ready", "failed", "crashed", "stopped"]
#: beyond a server's own timeouts, how long the loop's thread waits before giving up on it
GRACE = 5.0
#: how long stopping all servers may take (the SDK gives each ~4 s to exit, then kills it)
STOP_TIMEOUT = 15.0
MAX_RESULT_CHARS = 32 * 1024
MAX_ERROR_CHARS = 500
MAX_PAGES = 8


@dataclass
class ServerStatus:
    """What ``rune mcp`` and ``rune doctor`` show about one server."""

    config: McpServerConfig
    state: State = "starting"
    error: str = ""
    #: inside bubblewrap (None for a remote server: it runs elsewhere)
    contained: bool | None = None
    tools: tuple[McpTool, ...] = ()
    warnings: tuple[str, ...] = ()
    #: seconds from start to its tools listed
    startup: float = 0.0

    @property
    def name(self) -> str:
        return self.config.name

    def where(self) -> str:
        """Where it runs, in a few words."""
        if self.config.url is not None:
            return f"remote at {visible(self.config.url, keep='')}"
        if self.contained:
            network = "network allowed" if self.config.network else "no network"
            writes = "writes its cwd" if self.config.writable else "writes nowhere"
            return f"contained (bubblewrap: {network}, {writes})"
        return "NOT contained: runs with your full user rights"


def fingerprint(config: McpServerConfig) -> str:
    """What an approval binds to besides the call: the server's configuration."""
    data = json.dumps(config.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()


@dataclass
class _Connection:
    status: ServerStatus
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    session: Any = None
    future: concurrent.futures.Future[None] | None = None
    log: IO[bytes] | None = None
    #: a contained server's cgroups (its processes and memory in all), for its whole life
    cgroup: RunCgroup | None = None


def _server_needs(config: McpServerConfig, path: str | None, home: Path) -> list[Path]:
    """What a contained server needs bound: its program and every absolute path to an existing
    file among its arguments (the user's config names them: ``python /opt/srv/server.py``),
    each with its interpreter's installation (:func:`rune.tools.runtime_dirs.runtime_dirs`;
    any file: the user named them)."""
    assert config.command is not None
    program = shutil.which(config.command, path=path)
    named = [Path(program)] if program else []
    named += [Path(a) for a in config.args if os.path.isabs(a) and os.path.isfile(a)]
    return [needed for file in named for needed in runtime_dirs(file, home, any_file=True)]


class McpManager:
    """Starts the servers of ``servers`` (``start``), lists their tools, calls them, and stops
    them all (``close``, or leaving the ``with`` block)."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        *,
        workspace: Path,
        policy: SandboxPolicy,
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.policy = policy
        self._connections = {c.name: _Connection(ServerStatus(c)) for c in servers}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> McpManager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what there is -------------------------------------------------------------------

    def statuses(self) -> list[ServerStatus]:
        return [c.status for c in self._connections.values()]

    def status(self, server: str) -> ServerStatus | None:
        connection = self._connections.get(server)
        return None if connection is None else connection.status

    def tools(self) -> list[McpTool]:
        return [t for c in self._connections.values() for t in c.status.tools]

    def problems(self) -> list[str]:
        """One line per server that failed to start, and per tool left out of a listing."""
        lines: list[str] = []
        for status in self.statuses():
            if status.state in ("failed", "crashed"):
                lines.append(f"MCP server {status.name} {status.state}: {status.error}")
            lines.extend(f"MCP server {w}" for w in status.warnings)
        return lines

    # --- start and stop ------------------------------------------------------------------

    def start(self) -> None:
        """Start every server at once; return when each is ready or has failed."""
        if not self._connections or self._loop is not None:
            return
        try:
            import mcp  # noqa: F401
        except ImportError as err:
            for connection in self._connections.values():
                self._fail(
                    connection,
                    f"the mcp package is not installed ({err}); {extra_install_hint('mcp')}",
                )
            return
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="rune-mcp", daemon=True)
        self._thread.start()
        for connection in self._connections.values():
            connection.future = asyncio.run_coroutine_threadsafe(self._serve(connection), loop)
        for connection in self._connections.values():
            config = connection.status.config
            if not connection.ready.wait(config.start_timeout + GRACE):
                self._fail(connection, f"did not start within {config.start_timeout:g} s")
                self._stop(connection)

    def close(self) -> None:
        """Stop every server and the event-loop thread; leaves no server process behind."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        for connection in self._connections.values():
            self._stop(connection)
        deadline = time.monotonic() + STOP_TIMEOUT
        for connection in self._connections.values():
            if connection.future is not None:
                with contextlib.suppress(Exception):
                    connection.future.result(max(0.0, deadline - time.monotonic()))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(GRACE)
        if not thread.is_alive():
            loop.close()
        for connection in self._connections.values():
            if connection.log is not None:
                connection.log.close()
                connection.log = None
            if connection.status.state in ("ready", "starting"):
                connection.status.state = "stopped"
        self._loop = self._thread = None

    def _stop(self, connection: _Connection) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(connection.stop.set)

    def _fail(self, connection: _Connection, error: str, state: State = "failed") -> None:
        connection.status.state = state
        connection.status.error = error
        connection.status.tools = ()
        connection.ready.set()

    async def _serve(self, connection: _Connection) -> None:
        """One server's whole life, in one task: connect, list, wait for stop, disconnect."""
        from mcp import ClientSession

        status = connection.status
        config = status.config
        started = time.monotonic()
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(connection))
                session = await stack.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=config.start_timeout)
                )
                await session.initialize()
                listed = await _list_tools(session)
                tools, warnings = accept_tools(
                    config.name,
                    listed,
                    trusted=config.trusted,
                    trusted_tools=config.trusted_tools,
                )
                status.tools, status.warnings = tuple(tools), tuple(warnings)
                status.startup = time.monotonic() - started
                connection.session = session
                status.state = "ready"
                connection.ready.set()
                await connection.stop.wait()
                connection.session = None
        except asyncio.CancelledError:
            pass
        except BaseException as err:
            if status.state == "starting":
                self._fail(connection, self._start_failure(connection, err))
        finally:
            connection.session = None
            connection.ready.set()

    @contextlib.asynccontextmanager
    async def _transport(self, connection: _Connection) -> AsyncIterator[tuple[Any, Any]]:
        config = connection.status.config
        if config.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            async with streamable_http_client(config.url) as streams:
                yield streams[0], streams[1]
            return
        from mcp.client.stdio import stdio_client

        # Open until close(): a failed start and a crash quote its last line.
        connection.log = tempfile.TemporaryFile()  # noqa: SIM115
        errlog: Any = connection.log  # the SDK hands it to the process as its stderr
        try:
            params = self._stdio_parameters(connection)
            async with stdio_client(params, errlog=errlog) as streams:
                yield streams[0], streams[1]
        finally:
            if connection.cgroup is not None:
                connection.cgroup.remove()  # and whatever the server left running in it
                connection.cgroup = None

    def _stdio_parameters(self, connection: _Connection) -> Any:
        """The SDK's parameters for a stdio server: its command, inside bubblewrap when it
        works here (or refused when the config demands it and it does not)."""
        from mcp import StdioServerParameters

        config = connection.status.config
        assert config.command is not None
        cwd = Path(os.path.realpath(config.cwd or self.workspace))
        argv = [config.command, *config.args]
        home = self.policy.home or Path.home()
        env = contained_environment(os.environ, home)
        bwrap = containment(ToolContext(self.policy, cwd, config.contained))
        connection.status.contained = bwrap is not None
        if bwrap is None:
            env.pop("TMPDIR")
            if "TMPDIR" in os.environ:
                env["TMPDIR"] = os.environ["TMPDIR"]
        else:
            policy = replace(self.policy, write_roots=[cwd] if config.writable else [])
            plan = plan_mounts(policy, cwd, needs=_server_needs(config, env.get("PATH"), home))
            seccomp = PLACEHOLDER if seccomp_works(bwrap) else None
            argv = [*bwrap_argv(bwrap, plan, cwd, seccomp, network=config.network), *argv]
            if seccomp is not None:
                argv = [sys.executable, "-I", "-m", "rune.tools.mcp.launch", *argv]
            connection.cgroup = open_cgroup(COMMAND)
            argv = launcher(COMMAND, connection.cgroup, argv)
        env.update(config.env)
        return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)

    def _start_failure(self, connection: _Connection, err: BaseException) -> str:
        """One line: why the server did not start, with the last line it wrote to stderr."""
        from mcp.types import CONNECTION_CLOSED

        cause = _first_leaf(err)
        if isinstance(cause, ToolError):
            reason = str(cause)
        elif getattr(cause, "code", None) == CONNECTION_CLOSED:
            reason = "the server exited before it answered"
        elif isinstance(cause, OSError):
            reason = f"cannot start {connection.status.config.command!r}: {cause.strerror or cause}"
        else:
            reason = _describe(cause)
        return _with_stderr(reason, connection.log)

    # --- calls ---------------------------------------------------------------------------

    def call(self, tool: McpTool, arguments: Mapping[str, Any]) -> str:
        """Call ``tool`` with ``arguments``; its text for the model. Raises :class:`McpError`
        for a server fault and :class:`ToolError` for an error result."""
        connection = self._connections.get(tool.server)
        session = connection.session if connection is not None else None
        if connection is None or connection.status.state != "ready" or session is None:
            state = connection.status if connection is not None else None
            why = f"{state.state}: {state.error}" if state is not None and state.error else "down"
            raise McpError(f"MCP server {tool.server} is not running ({why}); nothing was called.")
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        timeout = connection.status.config.call_timeout
        assert self._loop is not None  # a session exists only while the loop runs
        future = asyncio.run_coroutine_threadsafe(
            session.call_tool(tool.remote, dict(arguments), read_timeout_seconds=timeout),
            self._loop,
        )
        try:
            result = future.result(timeout + GRACE)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpError(_timed_out(tool, timeout)) from None
        except MCPError as err:
            if err.code == REQUEST_TIMEOUT:
                raise McpError(_timed_out(tool, timeout)) from None
            if err.code == CONNECTION_CLOSED:
                why = _with_stderr("the server stopped during a call", connection.log)
                self._fail(connection, why, "crashed")
                self._stop(connection)
                raise McpError(
                    f"MCP server {tool.server} stopped during the call to {tool.name} (it "
                    "crashed or exited); its tools are gone for this session."
                ) from None
            refused = f"MCP server {tool.server} refused {tool.name}: {_describe(err)}"
            raise McpError(refused) from None
        except Exception as err:
            raise McpError(
                f"MCP server {tool.server} answered {tool.name} with something Rune cannot "
                f"read: {_describe(err)}"
            ) from None
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(f"{tool.name} returned an error: {text}")
        return text


async def _list_tools(session: Any) -> list[Any]:
    """Every page of the server's tool listing (at most :data:`MAX_PAGES`)."""
    from mcp.types import PaginatedRequestParams

    listed: list[Any] = []
    cursor = None
    for _ in range(MAX_PAGES):
        params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        listed.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return listed


def result_text(result: Any) -> str:
    """A ``CallToolResult`` as text for the model: text blocks as they are, text resources'
    text, a one-line note for anything else (images, audio, binary resources); structured
    content when there is nothing else. Capped, with hidden characters escaped."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", "?")
        if kind == "text":
            parts.append(str(block.text))
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None else f"[binary resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
        else:
            mime = getattr(block, "mime_type", "") or ""
            parts.append(f"[{kind} content {mime}, not shown]".replace(" ,", ","))
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = (
            text[:MAX_RESULT_CHARS]
            + f"\n[... cut: the result is {len(text)} characters; the first {MAX_RESULT_CHARS} "
            "are shown]"
        )
    shown, hidden = escape_hidden(text)
    return "\n".join(p for p in (shown or "(no output)", hidden_note(hidden)) if p)


def _timed_out(tool: McpTool, timeout: float) -> str:
    return (
        f"MCP server {tool.server} did not answer {tool.name} within {timeout:g} s "
        "(call_timeout); the call was abandoned."
    )


def _first_leaf(err: BaseException) -> BaseException:
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def _describe(err: BaseException) -> str:
    text = visible(" ".join(str(err).split()), keep="")[:MAX_ERROR_CHARS]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _with_stderr(reason: str, log: IO[bytes] | None) -> str:
    tail = _stderr_tail(log)
    return f"{reason}; its stderr ends: {tail}" if tail else reason


def _stderr_tail(log: IO[bytes] | None) -> str:
    """The last line the server wrote to its stderr file (read without moving the file's
    position: the server's process shares it)."""
    if log is None:
        return ""
    with contextlib.suppress(OSError, ValueError):
        fd = log.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, 4096, max(0, size - 4096)).decode("utf-8", "replace")
        lines = [line.strip() for line in data.splitlines() if line.strip()]
        if lines:
            return visible(lines[-1], keep="")[:MAX_ERROR_CHARS]
    return ""


__all__ = [
    "McpManager",
    "ServerStatus",
    "fingerprint",
    "result_text",
]
