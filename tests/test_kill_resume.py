"""SIGKILL a real process driving a session at random points; restart until it finishes.

After every kill the journal must still hold everything written before it, the restarted
process resumes from it, and in the end the files are right, every scripted model reply is in
the conversation exactly once, and no more model calls were redone than there were kills.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rune.sessions import read_journal
from rune.sessions.journal import MESSAGE, USER

DRIVER = Path(__file__).with_name("kill_resume_driver.py")
sys.path.insert(0, str(DRIVER.parent))
from kill_resume_driver import SCRIPT, USER_TURNS  # noqa: E402

ROUNDS = 4
KILLS_PER_ROUND = 4


def journal_files(data: Path) -> list[Path]:
    return sorted((data / "sessions").glob("*/journal.jsonl"))


def journal_lines(data: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in journal_files(data))


def conversation(data: Path) -> list[dict]:
    files = journal_files(data)
    if not files:
        return []
    records = read_journal(files[-1]).records
    return [dict(r.data["message"]) for r in records if r.kind in (USER, MESSAGE)]


def start(workspace: Path, data: Path, calls: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(DRIVER), str(workspace), str(calls)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RUNE_DATA_DIR": str(data)},
    )


def kill_at_random(
    child: subprocess.Popen[str], data: Path, rng: random.Random, *, first: bool = False
) -> bool:
    """Kill after a random delay or once the journal reaches a random length; True if killed.
    The ``first`` kill of a round is always by a length every run reaches (a few lines): by a
    delay alone, a run that finished sooner left the round with no kill at all."""
    delay = rng.uniform(0.15, 0.7)
    deadline = float("inf") if first else time.monotonic() + delay
    target = journal_lines(data) + rng.randint(1, 4 if first else 12)
    by_lines = first or rng.random() < 0.5
    while child.poll() is None:
        if (by_lines and journal_lines(data) >= target) or time.monotonic() >= deadline:
            child.send_signal(signal.SIGKILL)
            child.wait()
            return True
        time.sleep(0.002)
    return False


@pytest.mark.parametrize("seed", range(ROUNDS))
def test_killed_sessions_resume_from_the_journal_and_finish(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    workspace, data, calls = tmp_path / "ws", tmp_path / "data", tmp_path / "calls.log"
    workspace.mkdir()
    (workspace / "seed.txt").write_text("seed\n")
    kills = 0
    snapshots: list[list[dict]] = []
    while True:
        child = start(workspace, data, calls)
        if kills < KILLS_PER_ROUND and kill_at_random(child, data, rng, first=kills == 0):
            kills += 1
            snapshots.append(conversation(data))
            continue
        out, err = child.communicate(timeout=30)
        assert child.returncode == 0, err
        assert out.startswith("FINISHED")
        break
    assert kills >= 1, "no kill landed: the test proved nothing"
    final = conversation(data)
    for snapshot in snapshots:
        assert final[: len(snapshot)] == snapshot, "a journaled message was lost"

    assert (workspace / "one.txt").read_text() == "one\n"
    assert (workspace / "two.txt").read_text() == "2\n"
    messages = final
    assert [m["content"] for m in messages if m["role"] == "user"] == USER_TURNS
    replies = [m for m in messages if m["role"] == "assistant"]
    assert len(replies) == len(SCRIPT)
    for reply, scripted in zip(replies, SCRIPT, strict=True):
        assert reply.get("content", "") == scripted.get("content", "")
        assert reply.get("tool_calls", []) == scripted.get("tool_calls", [])
    # every tool call has exactly one result
    for at, message in enumerate(messages):
        if message.get("tool_calls"):
            results = messages[at + 1 : at + 1 + len(message["tool_calls"])]
            roles = "\n".join(f"{m['role']}: {m.get('content', '')[:40]!r}" for m in messages)
            assert [r["role"] for r in results] == ["tool"] * len(message["tool_calls"]), roles
    started = calls.read_text().split()
    redone = len(started) - len(SCRIPT)
    assert 0 <= redone <= kills, (started, kills)
