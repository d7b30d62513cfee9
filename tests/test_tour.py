"""What the newcomer's tour of the README found misleading (issue 25, the second tour): each
through the real ``rune`` command in a subprocess, the model scripted (``--backend scripted``)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fakes.cli import rune


def test_config_piped_prints_whole_values(home: Path) -> None:
    deep = home / ("a-rather-long-directory-name-" * 6) / "project"
    deep.mkdir(parents=True)
    done = rune(home, "config", "--workspace", str(deep), "--write-root", str(deep / "out"))
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert str(deep) in rows["workspace"].split()
    assert rows["workspace"].endswith("flag --workspace")
    assert str(deep / "out") in rows["sandbox.write_roots"]


def test_sessions_show_of_a_waiting_session_ends_with_how_to_resume_it(home: Path) -> None:
    waiting = rune(home, "demo", "--backend", "scripted")  # no answer on stdin: it waits
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr
    (session_id,) = re.findall(r"rune resume (\d{8}-\d{6}-[0-9a-f]+)", waiting.stderr)
    shown = rune(home, "sessions", "show", session_id)
    assert shown.returncode == 0, shown.stderr
    last = shown.stdout.strip().splitlines()[-1]
    assert f"`rune resume {session_id}`" in last and "approval is waiting" in last
