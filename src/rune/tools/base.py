"""What every built-in tool is made of: its context, its spec and its functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rune.tools.sandbox import SandboxPolicy
from rune.tools.spec import PreparedChange, ToolSpec, Trial


@dataclass(frozen=True)
class ToolContext:
    """The session's policy and workspace; relative paths resolve against ``workspace`` only.

    ``contain_commands``: True = run commands only inside bwrap (refuse without it), False =
    never contain, None = contain whenever bwrap works on this machine.
    """

    policy: SandboxPolicy
    workspace: Path
    contain_commands: bool | None = None


Args = Mapping[str, Any]


@dataclass(frozen=True)
class BuiltinTool:
    spec: ToolSpec
    run: Callable[[ToolContext, Args], str] | None = None
    prepare: Callable[[ToolContext, Args], PreparedChange] | None = None
    apply: Callable[[ToolContext, PreparedChange], str] | None = None
    #: for a file change: the file, what it holds now (None: absent) and the bytes the change
    #: would leave in it, nothing written (lets a check be tried on the change before anyone
    #: is asked to approve it)
    planned: Callable[[ToolContext, Args], tuple[Path, bytes | None, bytes]] | None = None
    #: for a check: the check run as if each file of the mapping held its content, nothing
    #: written (what a change would make of it)
    trial: Callable[[ToolContext, Args, Mapping[Path, bytes]], Trial] | None = None
    #: whether the tool is offered in a context (None: always); a check is offered only where
    #: it can run contained
    offered: Callable[[ToolContext], bool] | None = None


def string_arg(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def integer_arg(
    description: str, *, minimum: int | None = None, maximum: int | None = None
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "description": description}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


PATH_ARG = string_arg("File path, absolute or relative to the workspace.")
