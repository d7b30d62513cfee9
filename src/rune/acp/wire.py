"""The JSON-RPC wire of ``rune acp``: newline-delimited JSON on two file descriptors, read with
distrust.

The SDK's own stdio transport skips a line that is not JSON without a word, lets one line grow
without bound, and fails on a message that is JSON but not a JSON-RPC object (``[1]``, an id
that is a list). This transport answers each of those with the JSON-RPC error the spec names
(-32700 parse error, -32600 invalid request; the id is null when none can be trusted) and goes
on reading; a line longer than :data:`MAX_MESSAGE_BYTES` is dropped unread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

#: one message's limit: room for a prompt with files attached, not for a memory attack
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
#: JSON-RPC ids Rune answers with; anything else is not an id it can echo
_ID_TYPES = (str, int)


def error_message(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, _ID_TYPES) and not isinstance(value, bool))


def check_message(message: Any) -> dict[str, Any] | None:
    """Why ``message`` is not a JSON-RPC request, notification or response, as the error to
    send back (None: it is one)."""
    if not isinstance(message, dict):
        return error_message(-32600, "Invalid request: not a JSON object")
    request_id = message.get("id")
    if not _valid_id(request_id):
        return error_message(-32600, "Invalid request: the id must be a string or an integer")
    method = message.get("method")
    if "method" in message:
        if not isinstance(method, str):
            return error_message(-32600, "Invalid request: the method must be a string", request_id)
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            return error_message(-32600, "Invalid request: params must be an object", request_id)
        return None
    if "id" not in message or not ("result" in message or "error" in message):
        return error_message(-32600, "Invalid request: no method, and not a response", request_id)
    error = message.get("error")
    if error is not None and not isinstance(error, dict):
        return error_message(-32600, "Invalid response: the error must be an object", request_id)
    return None


class GuardedTransport:
    """An ``acp`` message transport over a stream pair, which never hands the connection a
    message it cannot handle."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._lock:
            if self._closed:
                raise ConnectionError("the client went away")
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                await self._answer(error_message(-32700, "Parse error: not JSON"))
                continue
            problem = check_message(message)
            if problem is not None:
                # A response Rune cannot match to a request needs no answer (nobody waits).
                if isinstance(message, dict) and "method" not in message and "id" in message:
                    continue
                await self._answer(problem)
                continue
            assert isinstance(message, dict)
            return message

    async def close(self) -> None:
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            self._writer.close()

    async def _answer(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await self.send(message)

    async def _read_line(self) -> bytes | None:
        """The next line (None at the end of input); a line over the limit is skipped to its
        end and answered with an error."""
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as err:
            return err.partial or None
        except asyncio.LimitOverrunError:
            pass
        while True:  # drop the rest of the oversized line, a buffer at a time
            try:
                await self._reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as err:
                await self._reader.readexactly(err.consumed)
                continue
            except asyncio.IncompleteReadError:
                return None
            await self._answer(
                error_message(-32600, f"Invalid request: longer than {MAX_MESSAGE_BYTES} bytes")
            )
            return b""
