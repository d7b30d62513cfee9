"""``rune acp``: serve the Agent Client Protocol on this process's stdin and stdout.

The protocol takes the real stdin and stdout for itself; descriptor 0 becomes /dev/null and
descriptor 1 becomes stderr, so nothing else that prints (a library, a warning, a child
process) can put a stray byte into the JSON-RPC stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import cast

from acp import Agent, run_agent

from rune.acp.agent import Loader, RuneAgent
from rune.acp.wire import MAX_MESSAGE_BYTES, GuardedTransport


def take_stdio() -> tuple[int, int]:
    """Duplicates of stdin and stdout for the protocol, with 0 and 1 pointed elsewhere."""
    sys.stdout.flush()
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return protocol_in, protocol_out


async def _serve(load: Loader, protocol_in: int, protocol_out: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(protocol_in, "rb", 0)
    )
    pipe, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(protocol_out, "wb", 0)
    )
    writer = asyncio.StreamWriter(pipe, protocol, reader, loop)
    agent = RuneAgent(load)
    serving = asyncio.current_task()
    assert serving is not None
    # An editor ends its agent with SIGTERM: close the sessions (and an embedded server) first.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, serving.cancel)
    try:
        # The SDK routes each method it finds on the agent; the rest answer "method not found".
        await run_agent(cast(Agent, agent), GuardedTransport(reader, writer))
    except asyncio.CancelledError:
        pass
    finally:
        await agent.close_all()
        with contextlib.suppress(OSError):
            writer.close()


def serve(load: Loader) -> int:
    """Serve until the client closes stdin (or sends SIGTERM); the exit status."""
    protocol_in, protocol_out = take_stdio()
    asyncio.run(_serve(load, protocol_in, protocol_out))
    return 0
