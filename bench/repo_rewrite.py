"""What a small model writes of a library function from its docstring alone (the repo suite).

For each planted bug of ``bench/suites/repo.json``: the library at its pinned version with the
bug planted, the function the bug is in, and the model asked in one plain request (no tools, no
grammar) to write that function from its contract as Rune builds it
(:func:`rune.assists.rewrite.contract_for`: the module's imports and the function with its body
left out, since each module is longer than a whole-file contract may be). The first try is at
temperature 0, the others at 0.8 (one seed each); a hit is a try whose function passes the
library's test file. This is what the repair's rewrites (``rune.assists.rewrite.afresh_samples``)
build on; the oracle here is the buggy function itself, which a run has to find.

    .venv/bin/python bench/repo_rewrite.py --tries 4 [--tasks 'toolz-*']

Needs the pulled model (``rune pull qwen2.5-coder:1.5b``) and the suite's sdists (fetched once);
run it alone on the machine.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from rune.assists.rewrite import _definition, contract_for, rewrite_prompt
from rune.models.catalog import find, pulled_path
from rune.models.embedded import EmbeddedLlamaServer
from rune.runtime.blocks import code_blocks
from rune.tools.python_code import replace_definition
from task_suites import fetch_sdist, load_repo_suite, matches, plant, project_venv

TEST_TIMEOUT_S = 60


def enclosing_function(source: str, line: int) -> str | None:
    """The dotted name (``f``, ``C.m``) of the innermost function holding ``line``."""
    found: str | None = None

    def walk(body: list[ast.stmt], prefix: str) -> None:
        nonlocal found
        for node in body:
            end = node.end_lineno or node.lineno
            if not node.lineno <= line <= end:
                continue
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found = prefix + node.name
            if isinstance(node, ast.ClassDef):
                walk(node.body, prefix + node.name + ".")

    walk(ast.parse(source).body, "")
    return found


def written(reply: str, name: str) -> str | None:
    """The definition of ``name`` in the reply's first block that has one, as Rune reads it."""
    return next((d for b in code_blocks(reply) if (d := _definition(b, name))), None)


def passes(workspace: Path, venv: Path, test_file: str) -> bool:
    command = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
    try:
        done = subprocess.run(
            [*command, test_file], cwd=workspace, capture_output=True, timeout=TEST_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return False  # a rewrite that loops forever
    return done.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder:1.5b")
    parser.add_argument("--tries", type=int, default=2)
    parser.add_argument("--tasks", default="*", help="bug ids, shell patterns, comma-separated")
    args = parser.parse_args()
    entry = find(args.model)
    if entry is None or pulled_path(entry) is None:
        sys.exit(f"pull the model first: rune pull {args.model}")
    suite = load_repo_suite()
    bugs = [bug for bug in suite.bugs if matches(bug.id, args.tasks)]
    venv = project_venv()
    hits = 0
    with (
        tempfile.TemporaryDirectory() as scratch,
        EmbeddedLlamaServer(entry.path, ctx=entry.context, slot_dir=Path(scratch)) as server,
    ):
        for bug in bugs:
            with tempfile.TemporaryDirectory() as where:
                workspace = Path(where)
                shutil.copytree(fetch_sdist(suite.pins[bug.package]), workspace, dirs_exist_ok=True)
                plant(bug, workspace)
                path = workspace / bug.file
                source = path.read_text(encoding="utf-8")
                name = enclosing_function(source, bug.line)
                contract = contract_for(source, name) if name else None
                if name is None or contract is None:
                    print(f"{bug.id:28} no contract ({name})", flush=True)
                    continue
                started, tries = time.perf_counter(), []
                for k in range(args.tries):
                    body = {
                        "messages": [
                            {"role": "user", "content": rewrite_prompt(bug.file, name, contract)}
                        ],
                        "temperature": 0 if k == 0 else 0.8,
                        "seed": 1 + k,
                        "max_tokens": 700,
                    }
                    answer = httpx.post(
                        f"{server.base_url}/v1/chat/completions", json=body, timeout=600
                    )
                    reply = str(answer.json()["choices"][0]["message"]["content"])
                    code = next(
                        (d for b in code_blocks(reply) if (d := _definition(b, name))), None
                    )
                    if code is None:
                        tries.append("no code")
                        continue
                    path.write_text(replace_definition(path, source, name, code), encoding="utf-8")
                    tries.append("pass" if passes(workspace, venv, bug.test_file) else "fail")
                    path.write_text(source, encoding="utf-8")
                    if tries[-1] == "pass":
                        break
                hit = tries[-1:] == ["pass"]
                hits += hit
                seconds = time.perf_counter() - started
                print(
                    f"{bug.id:28} {'hit' if hit else 'miss':4} {seconds:5.1f} s  {name}, "
                    f"contract {len(contract)} chars: {', '.join(tries)}",
                    flush=True,
                )
    print(f"written afresh, {args.tries} tries: {hits}/{len(bugs)}")


if __name__ == "__main__":
    main()
