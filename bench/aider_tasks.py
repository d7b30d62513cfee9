"""Baseline: run Aider on the bug-fix suite in ``bench/tasks`` against a local model server.

For each task the workspace is copied to a fresh temp dir, Aider is run once there with the task
text as ``--message`` and every ``.py`` file of the workspace on the command line, and then the
task's ``check.py`` is run in that dir (exit 0 = fixed). Prints one line per task and a summary:

    name  fixed/failed  seconds  calls  [notes]

``calls`` counts the requests Aider sent to the model (from its ``--llm-history-file``). Notes
flag top-level functions that disappeared from a file, Aider's own "did not conform to the edit
format" / failed-match messages, and timeouts. Aider itself is not a dependency of Rune: install
it in its own venv and pass its binary with ``--aider``.

    python bench/aider_tasks.py --aider /tmp/aider-venv/bin/aider [--edit-format diff]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
PARSE_TROUBLE = (
    "did not conform to the edit format",
    "SearchReplaceNoExactMatch",
    "Failed to apply edit",
    "Malformed response",
)


@dataclass
class Result:
    name: str
    fixed: bool
    seconds: float
    calls: int
    notes: list[str] = field(default_factory=list)


def top_level_defs(path: Path) -> set[str]:
    """Names of top-level functions and classes in ``path``; empty if it does not parse."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return set()
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in tree.body if isinstance(node, kinds)}


def metadata_file(directory: Path, model: str, context: int) -> Path:
    """A litellm model-metadata file so Aider knows the window of an unlisted local model."""
    path = directory / "model.metadata.json"
    entry = {
        "max_input_tokens": context,
        "max_output_tokens": context,
        "max_tokens": context,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        "litellm_provider": "openai",
        "mode": "chat",
    }
    path.write_text(json.dumps({model: entry}, indent=2))
    return path


def aider_env(home: Path) -> dict[str, str]:
    """The environment for Aider: a throwaway HOME, no analytics, no network look-ups."""
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        AIDER_ANALYTICS="false",
        AIDER_CHECK_UPDATE="false",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        NO_COLOR="1",
    )
    return env


def run_task(task: Path, args: argparse.Namespace, scratch: Path, meta: Path) -> Result:
    message = (task / "task.md").read_text().strip()
    work = scratch / task.name
    workspace = work / "workspace"
    shutil.copytree(task / "workspace", workspace)
    files = sorted(p.name for p in workspace.glob("*.py"))
    named = [name for name in files if name in message]
    before = {name: top_level_defs(workspace / name) for name in files}
    history = work / "llm_history.txt"
    home = work / "home"
    home.mkdir()
    cmd = [
        args.aider,
        "--model", args.model,
        "--openai-api-base", args.base_url,
        "--openai-api-key", "dummy",
        "--yes-always",
        "--no-git",
        "--message", message,
        "--no-analytics",
        "--no-check-update",
        "--no-show-model-warnings",
        "--no-show-release-notes",
        "--no-gitignore",
        "--no-pretty",
        "--model-metadata-file", str(meta),
        "--llm-history-file", str(history),
    ]  # fmt: skip
    if args.edit_format:
        cmd += ["--edit-format", args.edit_format]
    cmd += files
    notes: list[str] = []
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            cwd=workspace,
            env=aider_env(home),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        output = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        notes.append(f"timeout after {args.timeout:.0f}s")
    seconds = time.perf_counter() - start
    (work / "aider_output.txt").write_text(output)
    check = subprocess.run(
        [sys.executable, "-c", (task / "check.py").read_text()],
        cwd=workspace,
        capture_output=True,
        timeout=60,
    )
    calls = history.read_text().count("TO LLM") if history.exists() else 0
    for name in files:
        lost = before[name] - top_level_defs(workspace / name)
        if lost:
            notes.append(f"{name} lost {','.join(sorted(lost))}")
    for phrase in PARSE_TROUBLE:
        count = output.count(phrase)
        if count:
            notes.append(f"{count}x '{phrase}'")
    if named != files:
        notes.append(f"task names {','.join(named) or 'none'} of {','.join(files)}")
    return Result(task.name, check.returncode == 0, seconds, calls, notes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aider", default="aider", help="path to the aider binary")
    parser.add_argument("--base-url", default="http://127.0.0.1:18081/v1")
    parser.add_argument("--model", default="openai/qwen2.5-coder-1.5b-instruct-q4_k_m")
    parser.add_argument("--edit-format", default="", help="Aider's --edit-format; default: its own")
    parser.add_argument("--tasks", default="*", help="glob of task dir names under bench/tasks")
    parser.add_argument("--context", type=int, default=8192, help="the server's context window")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per task")
    parser.add_argument("--keep", type=Path, help="copy each task's work dir (logs, edits) here")
    args = parser.parse_args()

    tasks = sorted(p for p in TASKS_DIR.glob(args.tasks) if (p / "task.md").is_file())
    if not tasks:
        print(f"no tasks match {args.tasks!r} in {TASKS_DIR}", file=sys.stderr)
        return 2
    version = subprocess.run([args.aider, "--version"], capture_output=True, text=True).stdout
    print(f"# {version.strip()} model={args.model} edit-format={args.edit_format or 'default'}")

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="aider-tasks-") as tmp:
        scratch = Path(tmp)
        meta = metadata_file(scratch, args.model, args.context)
        for task in tasks:
            result = run_task(task, args, scratch, meta)
            results.append(result)
            status = "fixed" if result.fixed else "failed"
            notes = f"  [{'; '.join(result.notes)}]" if result.notes else ""
            print(f"{result.name:<28} {status:<6} {result.seconds:6.1f}s {result.calls}{notes}")
            sys.stdout.flush()
        if args.keep:
            shutil.copytree(scratch, args.keep, dirs_exist_ok=True)

    fixed = sum(r.fixed for r in results)
    seconds = [r.seconds for r in results]
    print(
        f"total: {fixed}/{len(results)} fixed, {sum(seconds):.1f}s wall, "
        f"median {statistics.median(seconds):.1f}s, {sum(r.calls for r in results)} model calls"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
