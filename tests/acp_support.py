"""What the ACP tests share: the ``rune acp`` command line and environment, the scripted model's
turns, and a check that no command of a test outlives its cancel."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakes.cli import call, closed_port, final

#: a sleep no other process on the machine runs: how a test finds the command it cancelled
MARKER_SECONDS = "31.4159"


def agent_command(*flags: str) -> list[str]:
    return [sys.executable, "-m", "rune.cli", "acp", "--backend", "scripted", *flags]


def agent_env(home: Path, script: list[dict[str, Any]]) -> dict[str, str]:
    """The agent's environment: HOME in a temp dir, no Ollama, the scripted model's turns."""
    path = home.parent / f"acp-script-{len(list(home.parent.glob('acp-script-*')))}.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return {
        **os.environ,
        "HOME": str(home),
        "OLLAMA_HOST": f"127.0.0.1:{closed_port()}",
        "NO_COLOR": "1",
        "RUNE_SCRIPT": str(path),
    }


def whole_turn_script() -> list[dict[str, Any]]:
    """Prompt 1 reads, changes notes.txt (approved), tries extra.txt (rejected) and answers;
    prompt 2 runs a long command (approved, then cancelled, so no model call follows); prompt 3
    answers."""
    return [
        call("read_file", path="notes.txt"),
        call("write_file", path="notes.txt", content="new\n"),
        call("write_file", path="extra.txt", content="never\n"),
        final("notes.txt now says new; extra.txt was refused."),
        call("run_command", command=f"touch started && sleep {MARKER_SECONDS} && touch finished"),
        final("still here after the cancel"),
    ]


def marker_running() -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"sleep\0{MARKER_SECONDS}".encode() in cmdline:
            return True
    return False


def wait_until_gone(seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not marker_running():
            return True
        time.sleep(0.1)
    return not marker_running()
