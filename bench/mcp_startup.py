"""Start-up cost of MCP servers: the time from nothing to the tools of two servers listed.

Starts, ``--runs`` times, an ``McpManager`` with two stdio servers — the SDK-written test
server (tests/fakes/mcp_server.py) and the real ``mcp-server-time`` from PyPI — as ``rune``
does at the start of a session (both at once, each inside bubblewrap where it works), and
prints the median and worst wall time until both have listed their tools, then the time to
stop them. The first run also pays for importing the SDK, which ``rune --help`` never does.

    python bench/mcp_startup.py [--runs 5] [--uncontained]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rune.settings.config import McpServerConfig
from rune.tools.mcp.client import McpManager
from rune.tools.sandbox import SandboxPolicy

ROOT = Path(__file__).resolve().parent.parent
TEST_SERVER = ROOT / "tests" / "fakes" / "mcp_server.py"


def servers(contained: bool | None) -> list[McpServerConfig]:
    time_server = Path(sys.executable).with_name("mcp-server-time")
    if not time_server.exists():
        sys.exit("mcp-server-time is not installed: pip install -e '.[dev]'")
    return [
        McpServerConfig(
            name="test", command=sys.executable, args=[str(TEST_SERVER)], contained=contained
        ),
        McpServerConfig(name="time", command=str(time_server), contained=contained),
    ]


def once(workspace: Path, contained: bool | None) -> tuple[float, float, int, str]:
    policy = SandboxPolicy(read_roots=[workspace], write_roots=[workspace], home=Path.home())
    manager = McpManager(servers(contained), workspace=workspace, policy=policy)
    started = time.perf_counter()
    manager.start()
    listed = time.perf_counter() - started
    problems = manager.problems()
    if problems:
        sys.exit("; ".join(problems))
    tools = len(manager.tools())
    where = ", ".join(f"{s.name}: {s.where()}" for s in manager.statuses())
    started = time.perf_counter()
    manager.close()
    return listed, time.perf_counter() - started, tools, where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--uncontained", action="store_true", help="never use bubblewrap")
    args = parser.parse_args()
    contained = False if args.uncontained else None
    with tempfile.TemporaryDirectory() as tmp:
        runs = [once(Path(tmp), contained) for _ in range(args.runs)]
    listed = [r[0] for r in runs]
    stopped = [r[1] for r in runs]
    print(f"servers: {runs[0][3]}; {runs[0][2]} tools")
    print(
        f"time to list the tools of two servers: first run {listed[0] * 1000:.0f} ms (imports "
        f"the SDK), median {statistics.median(listed) * 1000:.0f} ms, worst "
        f"{max(listed) * 1000:.0f} ms over {len(listed)} runs"
    )
    print(f"time to stop them: median {statistics.median(stopped) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
