"""Wall time of ``rune --help`` and ``rune --version``: a new process each run, as a user sees it.

Prints the median and p90 over ``--runs`` runs (after one warm-up) for each command, plus a bare
``python -c pass`` for scale. Target (issue 7): under 150 ms wall.

    python bench/startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_MS = 150.0


def rune_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m rune.cli``."""
    script = Path(sys.executable).with_name("rune")
    if script.is_file():
        return [str(script)]
    found = shutil.which("rune")
    return [found] if found else [sys.executable, "-m", "rune.cli"]


def installed_env() -> dict[str, str]:
    """The environment of an installed Rune: bytecode may be cached, as pip does on install.

    Without this, PYTHONDONTWRITEBYTECODE (set on some dev machines) makes every start compile
    Rune's modules from source, which is not what a user's start costs.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def wall_ms(command: list[str], runs: int) -> list[float]:
    env = installed_env()
    subprocess.run(command, capture_output=True, check=True, env=env)  # warm caches, write .pyc
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, env=env)
        times.append((time.perf_counter() - start) * 1000)
    return times


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    rune = rune_command()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "rune --version": [*rune, "--version"],
        "rune --help": [*rune, "--help"],
    }
    worst = 0.0
    print(f"{'command':<16} {'median ms':>10} {'p90 ms':>8}   ({args.runs} runs)")
    for name, command in cases.items():
        times = wall_ms(command, args.runs)
        median = statistics.median(times)
        print(f"{name:<16} {median:>10.1f} {p90(times):>8.1f}")
        if name.startswith("rune"):
            worst = max(worst, median)
    verdict = "within" if worst < TARGET_MS else "OVER"
    print(f"slowest rune median {worst:.1f} ms: {verdict} the {TARGET_MS:.0f} ms target")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
