"""The canary is part of CI: it must pass as a real process and fail loudly when a claim breaks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rune.app import canary


def test_canary_passes_as_a_process() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rune.app.canary"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
    assert f"{len(canary.CHECKS)} passed, 0 failed" in result.stdout


def test_a_broken_claim_makes_the_canary_fail(tmp_path: Path) -> None:
    def broken(_workspace: Path) -> str | None:
        return "deliberately broken"

    original = dict(canary.CHECKS)
    canary.CHECKS["deliberately broken claim"] = broken
    try:
        assert canary.main() == 1
    finally:
        canary.CHECKS.clear()
        canary.CHECKS.update(original)
