"""``ToolExecutor``: the built-in tools behind the sandbox, as the loop sees them.

``validate_write_path`` / ``validate_read_path`` live in :mod:`rune.tools.sandbox` and are
re-exported here, where the design document names them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rune.errors import ToolError, ToolInputError
from rune.messages import thaw
from rune.tools.builtin import BUILTIN_TOOLS, BuiltinTool, ToolContext
from rune.tools.sandbox import SandboxPolicy, validate_read_path, validate_write_path
from rune.tools.spec import PreparedChange, ToolSpec

__all__ = [
    "SandboxPolicy",
    "ToolExecutor",
    "validate_read_path",
    "validate_write_path",
]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict, Mapping),
    "array": (list, tuple),
}


def check_arguments(spec: ToolSpec, arguments: Any) -> None:
    """Refuse arguments that do not fit the schema, showing the schema to the model."""
    schema = spec.parameters
    problems: list[str] = []
    if not isinstance(arguments, Mapping):
        problems.append(f"arguments must be a JSON object, got {type(arguments).__name__}")
    else:
        for name in schema.get("required", ()):
            if name not in arguments:
                problems.append(f"missing required argument {name!r}")
        properties = schema.get("properties", {})
        for name, value in arguments.items():
            prop = properties.get(name)
            if prop is None:
                problems.append(f"unknown argument {name!r}")
                continue
            expected = _JSON_TYPES.get(prop.get("type", ""), ())
            wrong_bool = isinstance(value, bool) and prop.get("type") in ("integer", "number")
            if expected and (not isinstance(value, expected) or wrong_bool):
                problems.append(
                    f"argument {name!r} must be {prop['type']}, got {type(value).__name__}"
                )
    if problems:
        raise ToolInputError(
            f"invalid arguments for {spec.name}: {'; '.join(problems)}. Expected schema: "
            + json.dumps(thaw(schema), sort_keys=True)
        )


class ToolExecutor:
    """The built-in tools, confined by ``policy`` (default: the design document's policy).

    Relative paths resolve against ``workspace`` (default: the current directory at
    construction), never against a directory the model names.
    """

    def __init__(
        self,
        policy: SandboxPolicy | None = None,
        workspace: str | os.PathLike[str] | None = None,
        *,
        tools: Iterable[BuiltinTool] = BUILTIN_TOOLS,
    ) -> None:
        self.policy = policy if policy is not None else SandboxPolicy.default()
        self.workspace = Path(os.path.realpath(workspace if workspace is not None else os.getcwd()))
        self._ctx = ToolContext(self.policy, self.workspace)
        self._tools = {t.spec.name: t for t in tools}
        self._specs = tuple(t.spec for t in self._tools.values())

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def is_mutating(self, name: str) -> bool:
        tool = self._tools.get(name)
        return tool is not None and tool.spec.mutating

    def _tool(self, name: str, arguments: Any) -> BuiltinTool:
        tool = self._tools.get(name)
        if tool is None:
            raise ToolInputError(
                f"unknown tool {name!r}. Valid tools: {', '.join(sorted(self._tools))}."
            )
        check_arguments(tool.spec, arguments)
        return tool

    def run(self, name: str, arguments: Mapping[str, Any]) -> str:
        tool = self._tool(name, arguments)
        if tool.run is None:
            raise ToolError(f"{name} changes files and needs approval; it cannot run directly.")
        return tool.run(self._ctx, arguments)

    def prepare(self, name: str, arguments: Mapping[str, Any]) -> PreparedChange:
        tool = self._tool(name, arguments)
        if tool.prepare is None:
            raise ToolError(f"{name} is read-only; nothing to prepare.")
        return tool.prepare(self._ctx, arguments)

    def apply(self, change: PreparedChange) -> str:
        tool = self._tool(change.tool, change.arguments)
        if tool.apply is None:
            raise ToolError(f"{change.tool} is read-only; nothing to apply.")
        return tool.apply(self._ctx, change)
