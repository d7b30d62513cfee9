"""Session journals and ``rune sessions`` at scale (issue 11).

1. Journal growth: one session, ``write_file`` calls each paused for approval and approved
   (25 calls per model reply, 8 model turns per task, as many tasks as it takes), through the
   real operator, runtime, executor and journal, the model replaced by ScriptedTransport.
   Prints the journal's bytes per call for 10, 100 and 1,000 calls: linear growth keeps it
   flat (the pause records once held the whole conversation: 463 MB for 1,000 calls).
2. Listing: 1,000 sessions of a few records each (one with a 1,000-call journal, like the
   above), then ``rune sessions`` as a process (median of 5 runs, Python's start included)
   and ``SessionStore.list()`` alone. Target: the command in at most 200 ms.

    python bench/sessions.py [--calls 10 100 1000] [--sessions 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CALLS_PER_REPLY = 25
ITERATIONS = 8


def script(calls: int) -> list[list[dict[str, Any]]]:
    """The model's replies, task by task: up to 7 replies of calls, then an answer."""
    tasks: list[list[dict[str, Any]]] = []
    done = 0
    while done < calls:
        replies: list[dict[str, Any]] = []
        while done < calls and len(replies) < ITERATIONS - 1:
            batch = min(CALLS_PER_REPLY, calls - done)
            replies.append(
                {
                    "content": "",
                    "tool_calls": [
                        {
                            "id": f"c{done + n}",
                            "function": {
                                "name": "write_file",
                                "arguments": {
                                    "path": f"f{done + n}.txt",
                                    "content": f"line {done + n}\n" * 4,
                                },
                            },
                        }
                        for n in range(batch)
                    ],
                }
            )
            done += batch
        replies.append({"content": "written"})
        tasks.append(replies)
    return tasks


def journal_for(calls: int, root: Path) -> tuple[Path, float]:
    """A session with ``calls`` approved writes; its journal and the seconds it took."""
    from rune.operator import RuneOperator
    from rune.sessions import SessionStore
    from rune.tools.executor import ToolExecutor
    from rune.tools.sandbox import SandboxPolicy
    from rune.transport.scripted import ScriptedTransport

    workspace = root / f"ws-{calls}"
    workspace.mkdir()
    tasks = script(calls)
    transport = ScriptedTransport(
        [reply for task in tasks for reply in task], context_length=50_000_000
    )
    store = SessionStore(root / "sessions")
    started = time.perf_counter()
    with store.create(model="m", workspace=str(workspace), backend="scripted") as session:
        operator = RuneOperator(
            transport,
            ToolExecutor(SandboxPolicy(read_roots=[workspace], write_roots=[workspace]), workspace),
            model="m",
            session=session,
            max_context=50_000_000,
        )
        for number in range(len(tasks)):
            response = operator.send(f"write the files, part {number}")
            while response.pending is not None:
                response = operator.approve()
            assert response.success, response.error
        path = session.directory / "journal.jsonl"
    return path, time.perf_counter() - started


def growth(counts: list[int]) -> Path | None:
    print("journal growth (write_file calls, each approved):")
    kept: Path | None = None
    with tempfile.TemporaryDirectory(prefix="rune-bench-") as tmp:
        for calls in counts:
            path, seconds = journal_for(calls, Path(tmp))
            size = path.stat().st_size
            print(
                f"  {calls:>5} calls: journal {size / 1e6:8.2f} MB, {size / calls:8,.0f} bytes/call"
                f"  ({seconds:.1f} s)"
            )
            if calls == max(counts):
                kept = Path(tempfile.mkdtemp(prefix="rune-bench-journal-")) / "journal.jsonl"
                shutil.copy(path, kept)
    return kept


def listing(sessions: int, big: Path | None) -> None:
    from rune.sessions import SessionStore

    with tempfile.TemporaryDirectory(prefix="rune-bench-list-") as tmp:
        data = Path(tmp) / "data"
        store = SessionStore(data / "sessions")
        for number in range(sessions):
            with store.create(model="m", workspace=f"/w/{number}", backend="b") as session:
                message = {"role": "user", "content": f"task {number}"}
                session.append("user", {"message": message})
                answer = {"role": "assistant", "content": "done " * 20}
                session.append("message", {"message": answer})
                session.append("turn_end", {"success": True, "outcome": "done"})
                if number == 0 and big is not None:
                    shutil.copy(big, session.directory / "journal.jsonl")
        env = {**os.environ, "RUNE_DATA_DIR": str(data)}
        command = [sys.executable, "-m", "rune.cli", "sessions"]
        subprocess.run(command, env=env, capture_output=True, check=True)  # caches warm
        times = []
        for _ in range(5):
            started = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            times.append(time.perf_counter() - started)
        assert done.stdout.count("\n") == sessions, done.stdout[-500:]
        start_only = []
        for _ in range(5):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            start_only.append(time.perf_counter() - started)
        in_process = []
        for _ in range(5):
            started = time.perf_counter()
            store.list()
            in_process.append(time.perf_counter() - started)
        print(f"rune sessions over {sessions:,} sessions (one journal of {big_size(big)}):")
        print(f"  command: {statistics.median(times) * 1000:6.0f} ms median of 5 (target 200)")
        print(f"    of which Python's own start: {statistics.median(start_only) * 1000:.0f} ms")
        print(f"  SessionStore.list(): {statistics.median(in_process) * 1000:6.0f} ms")


def big_size(path: Path | None) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB" if path is not None else "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--sessions", type=int, default=1000)
    args = parser.parse_args()
    big = growth(args.calls)
    listing(args.sessions, big)
    if big is not None:
        shutil.rmtree(big.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
