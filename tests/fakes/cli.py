"""Run the real ``rune`` command in a subprocess, with a scripted model playing the attacker.

``--backend scripted`` replays the JSON list of assistant turns that ``RUNE_SCRIPT`` names
(see :mod:`rune.app.demo`); HOME is a temp directory, and the suite's conftest has already put
Rune's config and data directories in temp directories too.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sigint_as_in_the_foreground() -> None:
    """For a child's ``preexec_fn``: SIGINT as a shell sets it for a job in the foreground. A
    test run started in the background (``&`` in a script, as CI may) inherits SIGINT ignored,
    and a Ctrl-C sent to the child would then do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """An assistant turn that calls one tool."""
    return {"content": "", "tool_calls": [{"function": {"name": name, "arguments": arguments}}]}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant turn that calls several tools at once."""
    return {
        "content": "",
        "tool_calls": [{"function": {"name": n, "arguments": a}} for n, a in pairs],
    }


def final(text: str = "done") -> dict[str, Any]:
    return {"content": text}


def rune(
    home: Path,
    *args: str,
    script: list[dict[str, Any]] | None = None,
    stdin: str = "",
    env: dict[str, str] | None = None,
    timeout: float = 90,
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "HOME": str(home),
        "OLLAMA_HOST": f"127.0.0.1:{closed_port()}",
        "NO_COLOR": "1",
        **(env or {}),
    }
    if script is not None:
        path = home.parent / f"script-{len(list(home.parent.glob('script-*')))}.json"
        path.write_text(json.dumps(script), encoding="utf-8")
        environment["RUNE_SCRIPT"] = str(path)
    done = subprocess.run(
        [sys.executable, "-m", "rune.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        cwd=home,
        timeout=timeout,
        check=False,
    )
    # Rune's own traceback; a failing test's digest ("Traceback in the project:") is not one
    assert "Traceback (most recent call last)" not in done.stdout + done.stderr, (
        done.stdout + done.stderr
    )
    return done


def journals() -> str:
    """Everything every session journaled (what the model was shown, among the rest)."""
    root = Path(os.environ["RUNE_DATA_DIR"]) / "sessions"
    return "".join(p.read_text(encoding="utf-8") for p in sorted(root.glob("*/journal.jsonl")))


def session_of(done: subprocess.CompletedProcess[str]) -> str:
    """The id of the session a run names on its second line."""
    found = re.search(r"session (\d{8}-\d{6}-[0-9a-f]{6})", done.stdout)
    assert found is not None, done.stdout
    return found.group(1)


def scripted_demo_steps(home: Path) -> int:
    """The model steps the scripted demo takes: where Rune can run the demo's test_calc.py
    itself (checks run contained; the test is unittest-style, so any interpreter runs it), it
    does so after the change and the run ends when it passes (2); elsewhere the script's own
    check is asked for too (3)."""
    from rune.tools.commands import bwrap_works, find_bwrap

    bwrap = find_bwrap()
    return 2 if bwrap is not None and bwrap_works(bwrap) else 3
