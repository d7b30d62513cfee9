"""What an editor sends, checked before Rune acts on it: the session's directory, the
prompt's content, the MCP servers it passes. A value Rune cannot take is an invalid-params
error (-32602) that says why; nothing here touches a file beyond asking whether a directory is
one."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from acp import RequestError, schema

from rune.settings.config import McpServerConfig

#: how much text one prompt may carry (the model's window is far smaller)
MAX_PROMPT_CHARS = 1_000_000
#: the longest working directory a client may name
MAX_PATH_CHARS = 4096


def invalid(details: str) -> RequestError:
    return RequestError.invalid_params({"details": details})


def checked_cwd(cwd: Any) -> Path:
    """The client's working directory, when it can be a workspace (the sandbox does the rest)."""
    if not isinstance(cwd, str) or not cwd or len(cwd) > MAX_PATH_CHARS or "\0" in cwd:
        raise invalid("cwd must be an absolute path")
    path = Path(cwd)
    if not path.is_absolute():
        raise invalid(f"cwd must be an absolute path, not {cwd!r}")
    if not path.is_dir():
        raise invalid(f"cwd {cwd!r} is not an existing directory")
    return Path(os.path.realpath(path))


def prompt_text(blocks: list[Any]) -> str:
    """The user's message: text, and the text of files the editor attached. Rune reads files
    itself, inside its sandbox: a linked file is named, never read here."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, schema.TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, schema.ResourceContentBlock):
            parts.append(f"(file: {block.uri})")
        elif isinstance(block, schema.EmbeddedResourceContentBlock) and isinstance(
            block.resource, schema.TextResourceContents
        ):
            parts.append(f"<file uri={block.resource.uri!r}>\n{block.resource.text}\n</file>")
        else:
            raise invalid(f"Rune takes text and text files only, not {block.type} content")
    text = "\n".join(parts)
    if not text.strip():
        raise invalid("the prompt is empty")
    if len(text) > MAX_PROMPT_CHARS:
        raise invalid(f"the prompt is longer than {MAX_PROMPT_CHARS} characters")
    return text


def client_mcp_servers(servers: list[Any] | None) -> tuple[McpServerConfig, ...]:
    """The MCP servers the editor passes, as Rune's own config would declare them: started
    the same way (inside bubblewrap where it works, no network, tools that ask first)."""
    found: list[McpServerConfig] = []
    for server in servers or ():
        if not isinstance(server, schema.McpServerStdio):
            raise invalid("Rune starts stdio MCP servers only (no http, no sse)")
        try:
            found.append(
                McpServerConfig(
                    name=server.name,
                    command=server.command,
                    args=tuple(server.args),
                    env={variable.name: variable.value for variable in server.env},
                )
            )
        except ValueError as err:
            raise invalid(f"MCP server {server.name!r}: {err}") from None
    return tuple(found)


def call_arguments(value: Any) -> dict[str, Any]:
    """A journaled call's arguments: an object, or the JSON text of one (OpenAI's shape)."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError, RecursionError):
            value = json.loads(value)
    return value if isinstance(value, dict) else {}
