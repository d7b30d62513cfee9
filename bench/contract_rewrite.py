"""What a small model knows of a suite's tasks, asked plainly (no tools, no grammar).

Questions per task of ``bench/suites/algo`` (16 one-line bugs in textbook algorithms; only the
docstring says what is right), or with ``--suite spec`` of ``bench/suites/spec`` (15 stubs to
write from their docstrings; the task's own test file judges), each in one plain request at
temperature 0 to the embedded server (``--samples K``: K requests, the others at temperature
0.8 with seeds 1..K-1; a task counts when any one hits; ``--replies F`` keeps them):

- ``--ask line``: the file and the task; "which line is wrong?" A hit: the reply holds the fixed
  line (spaces ignored).
- ``--ask contract``: the file with every function's body left out (signature and docstring
  kept, ``...`` for the code); "write the bodies". A hit: the reply's code block passes the
  task's hidden ``check.py`` (``spec``: its test file passes). This is what
  ``rune.assists.rewrite`` builds on.
- ``--ask tests`` (``spec``): the same, with the task's test file shown below the stub (the file
  Aider gets with ``--read``).

    .venv/bin/python bench/contract_rewrite.py --ask contract
    .venv/bin/python bench/contract_rewrite.py --suite spec --ask contract --samples 5

Needs the pulled model (``rune pull qwen2.5-coder:1.5b``); run it alone on the machine.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from rune.models.catalog import find, pulled_path
from rune.models.embedded import EmbeddedLlamaServer

SUITES = Path(__file__).parent / "suites"
_BLOCK = re.compile(r"```(?:python)?\n(.*?)```", re.S)


def without_bodies(source: str) -> str:
    """``source`` with each function's body (after its docstring) replaced by ``...``."""
    lines = source.splitlines()
    functions = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)]
    for node in sorted(functions, key=lambda n: -n.lineno):
        has_doc = ast.get_docstring(node, clean=False) is not None
        body = node.body[1:] if has_doc else node.body
        if body:
            first = lines[body[0].lineno - 1]
            indent = first[: len(first) - len(first.lstrip())]
            lines[body[0].lineno - 1 : node.end_lineno] = [indent + "..."]
    return "\n".join(lines) + "\n"


def prompt(ask: str, task: Path, name: str, source: str) -> str:
    if ask == "tests":
        test = _test_file(task)
        return (
            f"Write the code of {name} in full: each function's body, as its docstring says. Keep "
            f"the names and signatures. The tests in {test.name} must pass.\n\n{name}\n```python\n"
            f"{without_bodies(source)}```\n\n{test.name}\n```python\n"
            f"{test.read_text(encoding='utf-8')}```\n\n"
            f"Reply with the whole file {name} in one ```python block."
        )
    if ask == "line":
        request = (task / "task.md").read_text(encoding="utf-8").strip()
        return (
            f"{request}\n\n{name}\n```python\n{source}```\n\nWhich line is wrong? Reply with "
            "the wrong line as it is, then the line as it should be, as:\nWRONG: <line>\n"
            "RIGHT: <line>"
        )
    return (
        f"Write the code of {name} in full: each function's body, as its docstring says. Keep "
        f"the names and signatures.\n\n{name}\n```python\n{without_bodies(source)}```\n\n"
        "Reply with the whole file in one ```python block."
    )


def hit(ask: str, task: Path, name: str, reply: str) -> bool:
    if ask == "line":
        broken = (task / "workspace" / name).read_text(encoding="utf-8").splitlines()
        fixed = (task / "solution" / name).read_text(encoding="utf-8").splitlines()
        wanted = [line.strip().replace(" ", "") for line in fixed if line not in broken]
        return any(line in reply.replace(" ", "") for line in wanted)
    block = _BLOCK.search(reply)
    with tempfile.TemporaryDirectory() as scratch:
        Path(scratch, name).write_text(block.group(1) if block else "", encoding="utf-8")
        if (task / "check.py").exists():
            check = (task / "check.py").read_text(encoding="utf-8")
            command = [sys.executable, "-c", check]
        else:  # spec: the task's own test file
            test = _test_file(task)
            Path(scratch, test.name).write_bytes(test.read_bytes())
            command = [sys.executable, "-m", "unittest", "-q", test.stem]
        try:
            done = subprocess.run(command, cwd=scratch, capture_output=True, timeout=120)
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def _own_files(task: Path) -> Iterator[Path]:
    """The task's Python files that are not its tests."""
    return (p for p in sorted((task / "workspace").glob("*.py")) if not p.name.startswith("test_"))


def _test_file(task: Path) -> Path:
    return next((task / "workspace").glob("test_*.py"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ask", choices=["line", "contract", "tests"], default="contract")
    parser.add_argument("--suite", choices=["algo", "spec"], default="algo")
    parser.add_argument("--replies", type=Path, help="write every reply here (JSON)")
    parser.add_argument(
        "--samples",
        type=int,
        default=1,
        help="requests per task: the first at temperature 0, the others at 0.8 with seeds 1..",
    )
    parser.add_argument("--model", default="qwen2.5-coder:1.5b")
    args = parser.parse_args()
    entry = find(args.model)
    if entry is None or pulled_path(entry) is None:
        sys.exit(f"pull the model first: rune pull {args.model}")
    hits = 0
    replies: dict[str, list[str]] = {}
    tasks = sorted(p for p in (SUITES / args.suite).iterdir() if p.is_dir())
    with (
        tempfile.TemporaryDirectory() as scratch,
        EmbeddedLlamaServer(entry.path, ctx=entry.context, slot_dir=Path(scratch)) as server,
    ):
        for task in tasks:
            name = next(_own_files(task)).name
            source = (task / "workspace" / name).read_text(encoding="utf-8")
            started = time.perf_counter()
            found = []
            for k in range(args.samples):
                body = {
                    "messages": [{"role": "user", "content": prompt(args.ask, task, name, source)}],
                    "temperature": 0.8 if k else 0,
                    "seed": k,
                    "max_tokens": 700 if args.suite == "algo" else 1200,
                }
                url = f"{server.base_url}/v1/chat/completions"
                answer = httpx.post(url, json=body, timeout=600)
                reply = str(answer.json()["choices"][0]["message"]["content"])
                found.append(hit(args.ask, task, name, reply))
                replies.setdefault(task.name, []).append(reply)
                if args.replies:
                    args.replies.write_text(json.dumps(replies, indent=1), encoding="utf-8")
            hits += any(found)
            seconds = time.perf_counter() - started
            marks = "".join("+" if f else "." for f in found)
            print(
                f"{task.name:28} {'hit' if any(found) else 'miss':4} {marks:8} {seconds:5.1f} s",
                flush=True,
            )
    print(f"--ask {args.ask}: {hits}/{len(tasks)} (any of {args.samples})")


if __name__ == "__main__":
    main()
