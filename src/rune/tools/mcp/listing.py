"""What an MCP server lists, made safe to show a model and a terminal.

A server's names, descriptions and schemas are hostile input, like a model's reply: a tool name
becomes ``SERVER__tool`` only when the tool's own name is plain (letters, digits, ``_``, ``-``,
``.``; dots become ``_``) and the whole fits :data:`MAX_NAME` characters; a description is
flattened to one escaped line of at most :data:`MAX_DESCRIPTION` characters; a schema must be
a JSON object schema of bounded size and depth whose ``properties`` and ``required`` have the
shapes argument checking reads. Anything else is left out with one warning line naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rune.limits import shape_problem
from rune.text import visible

#: the separator between a server's name and its tool's name
SEPARATOR = "__"
#: OpenAI-compatible servers refuse longer function names
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_SCHEMA_CHARS = 16 * 1024
MAX_SCHEMA_DEPTH = 16
MAX_TOOLS = 64
_PLAIN = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class McpTool:
    """One tool of one server, as Rune offers it."""

    server: str
    #: the server's own name for it (sent back in ``tools/call``)
    remote: str
    #: what the model calls it: ``SERVER__tool``
    name: str
    description: str
    parameters: Mapping[str, Any]
    #: the server says ``readOnlyHint: true``
    read_only: bool
    #: the user's config trusts the server or this tool
    trusted: bool = False

    @property
    def asks(self) -> bool:
        """Whether a call waits for the user's approval."""
        return not (self.read_only or self.trusted)


def public_name(server: str, remote: str) -> str:
    return f"{server}{SEPARATOR}{remote.replace('.', '_')}"


def _description(raw: Any, remote: str) -> str:
    text = " ".join(str(raw or "").split())
    text = visible(text, keep="")
    if len(text) > MAX_DESCRIPTION:
        text = text[: MAX_DESCRIPTION - 1] + "…"
    return text or f"the {remote} tool of an MCP server"


def _schema_problem(schema: Any) -> str | None:
    if not isinstance(schema, Mapping):
        return "its input schema is not an object"
    problem = shape_problem(schema, max_depth=MAX_SCHEMA_DEPTH)
    if problem is not None:
        return f"its input schema is {problem}"
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
        return f"its input schema is larger than {MAX_SCHEMA_CHARS // 1024} KiB"
    if schema.get("type", "object") != "object":
        return "its input schema does not describe a JSON object"
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping) or not all(
        isinstance(k, str) and isinstance(v, Mapping) for k, v in properties.items()
    ):
        return "its input schema's properties are not a table of schemas"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "its input schema's required list is not a list of names"
    return None


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema the model sees: type, properties and required (titles and the rest of the
    server's vocabulary dropped; a missing ``properties`` becomes an empty table)."""
    properties = dict(schema.get("properties", {}))
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if schema.get("required"):
        parameters["required"] = list(schema["required"])
    return parameters


def accept_tools(
    server: str,
    listed: Iterable[Any],
    *,
    trusted: bool = False,
    trusted_tools: Iterable[str] = (),
) -> tuple[list[McpTool], list[str]]:
    """The tools of ``listed`` (the SDK's ``Tool`` objects) Rune offers, and a warning for each
    one it leaves out."""
    trusted_names = set(trusted_tools)
    tools: list[McpTool] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for entry in listed:
        remote = getattr(entry, "name", None)
        shown = visible(str(remote)[:80], keep="")
        if len(tools) >= MAX_TOOLS:
            warnings.append(f"{server}: lists more than {MAX_TOOLS} tools; the rest are left out")
            break
        if not isinstance(remote, str) or not _PLAIN.fullmatch(remote):
            warnings.append(f"{server}: left out tool {shown!r}: its name is not plain")
            continue
        name = public_name(server, remote)
        if len(name) > MAX_NAME:
            warnings.append(f"{server}: left out tool {shown!r}: {name} is over {MAX_NAME} chars")
            continue
        if name in seen:
            warnings.append(f"{server}: left out tool {shown!r}: another tool is named {name}")
            continue
        schema = getattr(entry, "input_schema", None)
        problem = _schema_problem(schema)
        if problem is not None:
            warnings.append(f"{server}: left out tool {shown!r}: {problem}")
            continue
        assert isinstance(schema, Mapping)
        annotations = getattr(entry, "annotations", None)
        read_only = getattr(annotations, "read_only_hint", None) is True
        seen.add(name)
        tools.append(
            McpTool(
                server=server,
                remote=remote,
                name=name,
                description=_description(getattr(entry, "description", ""), remote),
                parameters=_parameters(schema),
                read_only=read_only,
                trusted=trusted or remote in trusted_names,
            )
        )
    return tools, warnings
