"""MCP tools as the loop sees them, and the built-in tools and MCP tools as one executor.

A tool the server declares ``readOnlyHint: true``, or the user's config trusts, runs at once;
every other one is a mutating request: ``prepare`` checks the arguments and shows the exact call
(server, tool, arguments, where the server runs), and only ``apply``, after approval, calls it.
The approval binds to the call and to the server's configuration; a pending call approved from
a new process calls the server that process connected to, and is refused when the server's
configuration changed or it no longer offers the tool.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rune.errors import McpError, ToolError, ToolInputError
from rune.messages import thaw
from rune.text import for_display, visible
from rune.tools.executor import ToolExecutor, check_arguments
from rune.tools.mcp.client import McpManager, ServerStatus, fingerprint
from rune.tools.mcp.listing import SEPARATOR, McpTool
from rune.tools.sandbox import SandboxPolicy
from rune.tools.spec import PreparedChange, ToolSpec


def spec_of(tool: McpTool) -> ToolSpec:
    return ToolSpec(tool.name, tool.description, tool.parameters, mutating=tool.asks)


class McpExecutor:
    """The tools of the servers ``manager`` started."""

    def __init__(self, manager: McpManager) -> None:
        self.manager = manager
        self._tools = {t.name: t for t in manager.tools()}
        self._specs = tuple(spec_of(t) for t in self._tools.values())

    def owns(self, name: str) -> bool:
        """Whether ``name`` is an MCP tool's name (offered or not: a server may be down)."""
        return SEPARATOR in name

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def is_mutating(self, name: str) -> bool:
        tool = self._tools.get(name)
        return tool is not None and tool.asks

    def _tool(self, name: str, arguments: Any) -> McpTool:
        tool = self._tools.get(name)
        if tool is None:
            server = self.manager.status(name.split(SEPARATOR, 1)[0])
            if server is not None and server.state != "ready":
                raise McpError(
                    f"MCP server {server.name} is not running ({server.state}: {server.error}); "
                    f"{visible(name, keep='')} was not called."
                )
            raise ToolInputError(
                f"unknown tool {visible(name, keep='')!r}. MCP tools: "
                f"{', '.join(sorted(self._tools)) or 'none'}."
            )
        check_arguments(spec_of(tool), arguments)
        return tool

    def run(self, name: str, arguments: Mapping[str, Any]) -> str:
        tool = self._tool(name, arguments)
        if tool.asks:
            raise ToolError(f"{name} needs approval; it cannot run directly.")
        return self.manager.call(tool, arguments)

    def prepare(self, name: str, arguments: Mapping[str, Any]) -> PreparedChange:
        tool = self._tool(name, arguments)
        status = self.manager.status(tool.server)
        assert status is not None
        return PreparedChange(
            tool=name,
            arguments=arguments,
            summary=f"{name}: call {tool.remote} on MCP server {tool.server}",
            preview=call_preview(tool, arguments, status),
            fingerprint={
                "server": tool.server,
                "tool": tool.remote,
                "config": fingerprint(status.config),
            },
            # Not a command: the preview's "runs:" line says where the server runs, and the
            # edges show the preview as it is.
            contained=None,
        )

    def apply(self, change: PreparedChange) -> str:
        tool = self._tool(change.tool, change.arguments)
        status = self.manager.status(tool.server)
        assert status is not None
        fresh = {"server": tool.server, "tool": tool.remote, "config": fingerprint(status.config)}
        if fresh != thaw(change.fingerprint):
            raise ToolError(
                f"the configuration of MCP server {tool.server} changed since this call was "
                "approved; nothing was called."
            )
        return self.manager.call(tool, change.arguments)


def call_preview(tool: McpTool, arguments: Mapping[str, Any], status: ServerStatus) -> str:
    """What the user approves: the server, how it runs, the tool and the exact arguments."""
    config = status.config
    if config.url is not None:
        origin = visible(config.url, keep="")
    else:
        origin = visible(" ".join([str(config.command), *config.args]), keep="")
    shown = json.dumps(thaw(arguments), indent=2, ensure_ascii=False, sort_keys=True)
    trust = (
        "the server does not declare it read-only"
        if not tool.read_only
        else "declared read-only, but not trusted"
    )
    return "\n".join(
        [
            f"MCP call: {tool.remote} on server {tool.server} ({trust})",
            f"server: {origin}",
            f"runs: {status.where()}",
            "arguments:",
            for_display(shown),
        ]
    )


class CombinedExecutor:
    """The built-in tools, then the MCP tools: one :class:`rune.tools.spec.Executor`. The
    built-in executor's workspace and policy are the session's (the context blocks read them)."""

    def __init__(self, builtin: ToolExecutor, mcp: McpExecutor) -> None:
        self.builtin = builtin
        self.mcp = mcp
        self._specs = (*builtin.specs(), *mcp.specs())

    @property
    def workspace(self) -> Path:
        return self.builtin.workspace

    @property
    def policy(self) -> SandboxPolicy:
        return self.builtin.policy

    def commands_contained(self) -> bool:
        return self.builtin.commands_contained()

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def _owner(self, name: str) -> ToolExecutor | McpExecutor:
        return self.mcp if self.mcp.owns(name) else self.builtin

    def is_mutating(self, name: str) -> bool:
        return self._owner(name).is_mutating(name)

    def run(self, name: str, arguments: Mapping[str, Any]) -> str:
        return self._owner(name).run(name, arguments)

    def prepare(self, name: str, arguments: Mapping[str, Any]) -> PreparedChange:
        return self._owner(name).prepare(name, arguments)

    def apply(self, change: PreparedChange) -> str:
        return self._owner(change.tool).apply(change)

    def read_grants(self) -> tuple[str, ...]:
        return self.builtin.read_grants()

    def restore_read_grants(self, trees: Sequence[str]) -> None:
        self.builtin.restore_read_grants(trees)
