"""A real MCP server, written with the SDK's server API, run as a stdio subprocess by the tests.

``python tests/fakes/mcp_server.py`` serves, over stdin/stdout:

- ``lookup`` (``readOnlyHint: true``): a value from a fixed table;
- ``write_note`` (no hint: mutating): appends a line to ``notes.txt`` in its working directory;
- ``fail`` (read-only): raises, so the result is an error result;
- ``hang`` (read-only): sleeps for the seconds it is given;
- ``crash`` (read-only): the server process exits mid-call;
- ``probe`` (read-only): what the server can see (an environment variable, whether it can
  connect to a TCP port on 127.0.0.1, whether it can create a file in a directory);
- ``noisy`` (read-only), whose description carries terminal escapes.

``python tests/fakes/mcp_server.py --http PORT`` serves the same over streamable HTTP at
``http://127.0.0.1:PORT/mcp``.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)
TABLE = {"alpha": "1", "beta": "2"}

server = MCPServer("rune-test")


@server.tool(annotations=READ_ONLY)
def lookup(key: str) -> str:
    """Look up a key in the table."""
    return TABLE.get(key, f"no such key: {key}")


@server.tool()
def write_note(text: str) -> str:
    """Append a line to notes.txt."""
    with Path("notes.txt").open("a", encoding="utf-8") as notes:
        notes.write(text + "\n")
    return f"noted: {text}"


@server.tool(annotations=READ_ONLY)
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"failing on purpose: {reason}")


@server.tool(annotations=READ_ONLY)
def hang(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "woke up"


@server.tool(annotations=READ_ONLY)
def crash() -> str:
    """The server dies."""
    os._exit(3)


@server.tool(annotations=READ_ONLY)
def probe(variable: str = "", port: int = 0, directory: str = "") -> str:
    """What the server can see and do."""
    lines = [f"env {variable}={os.environ.get(variable)!r}"] if variable else []
    if port:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                lines.append("connect: ok")
        except OSError as err:
            lines.append(f"connect: refused ({err.__class__.__name__})")
    if directory:
        try:
            (Path(directory) / "probe.txt").write_text("x")
            lines.append("write: ok")
        except OSError as err:
            lines.append(f"write: refused ({err.__class__.__name__})")
    return "\n".join(lines)


@server.tool(
    annotations=READ_ONLY,
    description="Noisy \x1b[31mred\x1b[0m description\r\nwith a second line",
)
def noisy() -> str:
    return "\x1b]0;title\x07plain"


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()
