"""How long the approval preview of a large rewrite takes, and a search over a 10k-file tree.

    python bench/preview_and_search.py

Preview: write_file's prepare (validation, reading the old file, the diff, escaping) on files of
1 MB and 4 MB (the edit cap), rewritten two ways: every other line changed (the case that took
difflib 20 s on 20k lines) and every line changed; then the CLI's colouring of that diff (what
the terminal gets). Search: ``search`` (ripgrep under Rune's budget) on 10,000 files in 100
directories, a pattern that matches in a few files, one that matches nowhere, and a ``glob``
that matches nothing (the walk still happens). Each figure is the best of 3 runs.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rune.frontend.view import diff_text
from rune.tools.executor import SandboxPolicy, ToolExecutor

RUNS = 3


def best(action: Callable[[], object]) -> tuple[float, object]:
    times, result = [], None
    for _ in range(RUNS):
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
    return min(times), result


def text_of(size: int) -> list[str]:
    lines, total, n = [], 0, 0
    while total < size:
        line = f"    value_{n} = compute({n}, {n * 7 % 13})  # line {n}\n"
        lines.append(line)
        total += len(line)
        n += 1
    return lines


def bench_preview(ws: Path, ex: ToolExecutor) -> None:
    print("preview of a write_file rewrite (prepare: read, diff, escape)")
    for size in (1_000_000, 4_000_000):
        old = text_of(size)
        (ws / "big.py.txt").write_text("".join(old))
        cases = {
            "every other line": "".join(
                line if i % 2 else line.replace("value", "renamed") for i, line in enumerate(old)
            ),
            "every line": "".join(line.replace("compute", "calc") for line in old),
        }
        for name, new in cases.items():
            args = {"path": "big.py.txt", "content": new}
            seconds, change = best(lambda a=args: ex.prepare("write_file", a))
            preview = change.preview  # type: ignore[attr-defined]
            render, _ = best(lambda p=preview: diff_text(p))
            print(
                f"  {size / 1e6:.0f} MB, {len(old):,} lines, {name:<16}: prepare "
                f"{seconds * 1000:7.1f} ms, diff {len(preview) / 1e6:5.1f} MB, "
                f"CLI colouring {render * 1000:7.1f} ms"
            )


def bench_search(ws: Path, ex: ToolExecutor) -> None:
    tree = ws / "tree"
    for d in range(100):
        folder = tree / f"pkg{d:03d}"
        folder.mkdir(parents=True)
        for f in range(100):
            body = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(20))
            if (d * 100 + f) % 2500 == 0:
                body += "NEEDLE = 1\n"
            (folder / f"mod{f:03d}.py").write_text(body)
    sizes = [p.stat().st_size for p in tree.rglob("*.py")]
    print(f"search over {len(sizes):,} files ({sum(sizes) / 1e6:.1f} MB)")
    for label, args in (
        ("a few matches", {"pattern": "NEEDLE", "path": "tree"}),
        ("no match", {"pattern": r"zz[0-9]+qq", "path": "tree"}),
        ("glob matching nothing", {"pattern": "x", "path": "tree", "glob": "*.nothing"}),
        ("100 matches (cap)", {"pattern": r"return x", "path": "tree"}),
    ):
        samples = []
        out = ""
        for _ in range(RUNS):
            started = time.perf_counter()
            out = ex.run("search", args)
            samples.append(time.perf_counter() - started)
        print(
            f"  {label:<22}: best {min(samples) * 1000:6.1f} ms, median "
            f"{statistics.median(samples) * 1000:6.1f} ms ({len(out.splitlines())} lines out)"
        )


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        ex = ToolExecutor(SandboxPolicy.workspace_only(ws), ws)
        bench_preview(ws, ex)
        bench_search(ws, ex)
    return 0


if __name__ == "__main__":
    sys.exit(main())
