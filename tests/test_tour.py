"""What the newcomer's tour of the README found misleading (issue 25, the second tour): each
through the real ``rune`` command in a subprocess, the model scripted (``--backend scripted``)."""

from __future__ import annotations

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
