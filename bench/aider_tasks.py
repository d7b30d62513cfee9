"""Baseline: run Aider on the task suites (``bench/task_suites.py``) against a local model server.

For each task the workspace is prepared in a fresh temp dir as for Rune (``bench/tasks.py``),
Aider is run once there with the task text as ``--message``, and then the suite's check is run
in that dir. Small workspaces (``bugs``, ``algo``, ``spec``) get every ``.py`` file that is not a
test on the command line and no git; their test files (``spec``) are given read-only
(``--read``). The repo-level suite is a git repository (the bug committed) and Aider is given no
file: it finds its way with its repo map, as on a real project. Where the suite has tests,
Aider runs them after each edit and sees their failures (``--auto-test --test-cmd``). A task is
fixed when its check passes and the test files it held are unchanged. Prints one line per task
and, per suite, the same summary as ``bench/tasks.py`` (fixed, false ``done`` = exit 0 while
the check fails, median seconds, model calls, prompt tokens):

    suite  name  fixed/failed  seconds  calls  prompt-tokens  [notes]

``calls`` counts the requests Aider sent to the model (from its ``--llm-history-file``); prompt
tokens add up Aider's own "Tokens: N sent" lines. Notes
flag top-level functions that disappeared from a file, Aider's own "did not conform to the edit
format" / failed-match messages, and timeouts. Aider itself is not a dependency of Rune: install
it in its own venv and pass its binary with ``--aider``.

    .venv/bin/python bench/aider_tasks.py --aider /tmp/aider-venv/bin/aider [--suite all]
        [--base-url http://127.0.0.1:PORT/v1] [--edit-format diff]

Without ``--base-url`` it serves ``--serve`` (a pulled catalogue model, qwen2.5-coder:1.5b by
default) on the embedded llama.cpp server exactly as ``bench/tasks.py`` does.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from task_suites import (
    SUITE_NAMES,
    Row,
    Task,
    changed_test_files,
    digest_of_tests,
    is_test_file,
    load_suite,
    selected,
    summary,
)

SENT = re.compile(r"Tokens: ([\d.]+)([kM]?) sent")
PARSE_TROUBLE = (
    "did not conform to the edit format",
    "SearchReplaceNoExactMatch",
    "Failed to apply edit",
    "Malformed response",
)


@dataclass
class Result:
    suite: str
    name: str
    fixed: bool
    exit0: bool
    seconds: float
    calls: int
    prompt_tokens: int
    notes: list[str] = field(default_factory=list)

    def row(self) -> Row:
        return Row(self.fixed, self.exit0, self.seconds, self.calls, self.prompt_tokens)


def prompt_tokens(output: str) -> int:
    """The sum of Aider's "Tokens: 1.2k sent" lines (rounded as Aider prints them)."""
    scale = {"": 1, "k": 1_000, "M": 1_000_000}
    return sum(round(float(n) * scale[unit]) for n, unit in SENT.findall(output))


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
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@localhost",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@localhost",
    )
    return env


def commit_all(workspace: Path, env: dict[str, str]) -> None:
    """The workspace as a git repository whose one commit holds the bug."""
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "as released"]):
        subprocess.run(["git", *cmd], cwd=workspace, env=env, check=True, capture_output=True)


def run_task(task: Task, args: argparse.Namespace, scratch: Path, meta: Path) -> Result:
    work = scratch / task.suite / task.name
    workspace = work / "workspace"
    work.mkdir(parents=True)
    task.prepare(workspace)
    tests_before = digest_of_tests(workspace)
    history = work / "llm_history.txt"
    home = work / "home"
    home.mkdir()
    env = aider_env(home)
    if task.git:
        commit_all(workspace, env)
        files: list[str] = []
    else:
        files = sorted(p.name for p in workspace.glob("*.py") if not is_test_file(p))
    named = [name for name in files if name in task.request]
    before = {name: top_level_defs(workspace / name) for name in files}
    cmd = [
        args.aider,
        "--model", args.model,
        "--openai-api-base", args.base_url,
        "--openai-api-key", "dummy",
        "--yes-always",
        "--message", task.request,
        "--no-analytics",
        "--no-check-update",
        "--no-show-model-warnings",
        "--no-show-release-notes",
        "--no-gitignore",
        "--no-pretty",
        "--model-metadata-file", str(meta),
        "--llm-history-file", str(history),
    ]  # fmt: skip
    if not task.git:
        cmd.append("--no-git")
    if task.tests:
        cmd += ["--auto-test", "--test-cmd", shlex.join(task.test_command)]
        if not task.git:
            for test in task.tests:
                cmd += ["--read", test]
    if args.edit_format:
        cmd += ["--edit-format", args.edit_format]
    cmd += files
    notes: list[str] = []
    start = time.perf_counter()
    returncode = None
    try:
        proc = subprocess.run(
            cmd,
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
        output = proc.stdout + proc.stderr
        returncode = proc.returncode
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        output = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        notes.append(f"timeout after {args.timeout:.0f}s")
    seconds = time.perf_counter() - start
    (work / "aider_output.txt").write_text(output)
    changed = changed_test_files(tests_before, workspace)
    fixed = task.check(workspace) and not changed
    calls = history.read_text().count("TO LLM") if history.exists() else 0
    for name in files:
        lost = before[name] - top_level_defs(workspace / name)
        if lost:
            notes.append(f"{name} lost {','.join(sorted(lost))}")
    if changed:
        notes.append(f"edited {','.join(changed)}")
    for phrase in PARSE_TROUBLE:
        count = output.count(phrase)
        if count:
            notes.append(f"{count}x '{phrase}'")
    if named != files:
        notes.append(f"task names {','.join(named) or 'none'} of {','.join(files)}")
    return Result(
        task.suite, task.name, fixed, returncode == 0, seconds, calls, prompt_tokens(output), notes
    )


@contextlib.contextmanager
def served(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """``(base URL, model name)`` of ``--base-url``, or of the embedded server started for the
    run as ``bench/tasks.py`` starts it (the same server code, no prompt cache to restore)."""
    from tasks import server_for

    options = argparse.Namespace(
        model=args.serve,
        base_url=args.base_url.removesuffix("/").removesuffix("/v1") if args.base_url else None,
        as_embedded=False,
        no_prompt_cache=True,
        option=[],  # the catalogue model's own generation options, as Rune runs it
    )
    with server_for(options) as (url, model, _choice, _slots):
        yield url, model


def run_suites(suites: dict[str, list[Task]], args: argparse.Namespace) -> None:
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="aider-tasks-") as tmp:
        scratch = Path(tmp)
        meta = metadata_file(scratch, args.model, args.context)
        for name, tasks in suites.items():
            for task in tasks:
                result = run_task(task, args, scratch, meta)
                results.append(result)
                status = "fixed" if result.fixed else "failed"
                notes = f"  [{'; '.join(result.notes)}]" if result.notes else ""
                print(
                    f"{name:<5} {result.name:<34} {status:<6} {result.seconds:6.1f}s "
                    f"{result.calls} {result.prompt_tokens}{notes}",
                    flush=True,
                )
            print(summary(name, [r.row() for r in results if r.suite == name]), flush=True)
        if args.keep:
            shutil.copytree(scratch, args.keep, dirs_exist_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aider", default="aider", help="path to the aider binary")
    parser.add_argument(
        "--base-url", help="a running OpenAI-compatible server (default: start the embedded one)"
    )
    parser.add_argument(
        "--serve",
        default="qwen2.5-coder:1.5b",
        help="without --base-url: the pulled catalogue model to serve, as bench/tasks.py does",
    )
    parser.add_argument("--model", help="Aider's model name (default: openai/<served model>)")
    parser.add_argument("--edit-format", default="", help="Aider's --edit-format; default: its own")
    parser.add_argument("--suite", choices=(*SUITE_NAMES, "all"), default="bugs")
    parser.add_argument(
        "--tasks", default="*", help="globs over task names, comma-separated (default: all)"
    )
    parser.add_argument("--context", type=int, default=8192, help="the server's context window")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per task")
    parser.add_argument("--keep", type=Path, help="copy each task's work dir (logs, edits) here")
    args = parser.parse_args()

    suites = {name: load_suite(name, args.tasks) for name in selected(args.suite)}
    suites = {name: tasks for name, tasks in suites.items() if tasks}
    if not suites:
        print(f"no task matches {args.tasks!r} in suite {args.suite}", file=sys.stderr)
        return 2
    version = subprocess.run([args.aider, "--version"], capture_output=True, text=True).stdout
    with served(args) as (base_url, model):
        args.base_url = base_url if base_url.endswith("/v1") else f"{base_url}/v1"
        args.model = args.model or f"openai/{model}"
        print(f"# {version.strip()} model={args.model} edit-format={args.edit_format or 'default'}")
        run_suites(suites, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
