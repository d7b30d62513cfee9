"""A hand-written stdio MCP server whose tool answers are malformed: for the tests that a reply
Rune (and the SDK) cannot read is a typed tool error, not a crash of the loop.

It answers ``initialize`` and ``tools/list`` correctly (one tool, ``garbled``, read-only), then
every ``tools/call`` with a result whose ``content`` is not a list.
"""

from __future__ import annotations

import json
import sys


def answer(request_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


TOOL = {
    "name": "garbled",
    "description": "answers garbage",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}

for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue  # a notification
    if method == "initialize":
        answer(
            request_id,
            {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            },
        )
    elif method == "tools/list":
        answer(request_id, {"tools": [TOOL]})
    elif method == "tools/call":
        answer(request_id, {"content": "not a list", "isError": "maybe"})
    else:
        sys.stdout.write(
            json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no"}}
            )
            + "\n"
        )
        sys.stdout.flush()
