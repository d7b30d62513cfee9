"""The task suite stays honest: every check fails on its bug and passes on the reference fix,
in a fresh interpreter, as ``bench/tasks.py`` runs it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from tasks import TASKS, check

ALL = sorted(p for p in TASKS.iterdir() if (p / "check.py").is_file())


def test_there_are_at_least_twelve_tasks() -> None:
    assert len(ALL) >= 12


@pytest.mark.parametrize("task", ALL, ids=lambda p: p.name)
def test_the_check_fails_on_the_bug_and_passes_on_the_fix(task: Path, tmp_path: Path) -> None:
    assert (task / "task.md").read_text().strip()
    buggy = tmp_path / "buggy"
    shutil.copytree(task / "workspace", buggy)
    assert not check(task, buggy)
    fixed = tmp_path / "fixed"
    shutil.copytree(task / "workspace", fixed)
    shutil.copytree(task / "solution", fixed, dirs_exist_ok=True)
    assert check(task, fixed)
