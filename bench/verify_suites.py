"""Verify the repo-level suite against PyPI, with no model: for every planted bug, the pinned
sdist (sha256 checked) passes the bug's whole test file as published, and with the bug planted
a test of that file fails. The first failing test and the first line of its error are what the
task tells the model; ``--write`` records them in ``bench/suites/repo.json``, and without it
the recorded ones must match what the run shows. Each group of the ``multi`` suite is planted
whole, and each of its bugs' named tests must still fail with the error the task quotes (one bug
must not hide another).

usage: .venv/bin/python bench/verify_suites.py [--bugs 'toolz-*'] [--write]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from task_suites import (
    REPO_SUITE,
    BugGroup,
    PlantedBug,
    RepoSuite,
    fetch_sdist,
    load_repo_suite,
    matches,
    plant,
    pytest_command,
    run_tests,
)


def first_failure(output: str) -> tuple[str, str]:
    """``(test id, first error line)`` from pytest's ``-rf --tb=short`` output."""
    test = next(
        (line[len("FAILED ") :].split(" - ")[0] for line in output.splitlines()
         if line.startswith("FAILED ")),
        "",
    )  # fmt: skip
    error = next(
        (line[1:].strip() for line in output.splitlines() if line.startswith("E ")),
        "",
    )
    return test, error


def verify(bug: PlantedBug, suite: RepoSuite, passed: dict[tuple[str, str], bool]) -> list[str]:
    """What is wrong with ``bug`` (empty: nothing); fills its test and error in the raw suite."""
    pristine = fetch_sdist(suite.pins[bug.package])
    problems: list[str] = []
    key = (bug.package, bug.test_file)
    with tempfile.TemporaryDirectory(prefix=f"verify-{bug.id}-") as scratch:
        if key not in passed:
            clean = Path(scratch) / "clean"
            shutil.copytree(pristine, clean)
            done = run_tests(clean, pytest_command([bug.test_file]))
            passed[key] = done.returncode == 0
            if not passed[key]:
                tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
                problems.append(f"{bug.test_file} fails without the bug: {tail}")
        elif not passed[key]:
            problems.append(f"{bug.test_file} fails without the bug")
        workspace = Path(scratch) / "buggy"
        shutil.copytree(pristine, workspace)
        plant(bug, workspace)
        done = run_tests(workspace, pytest_command(["-x", "--tb=short", "-rf", bug.test_file]))
        if done.returncode != 1:
            problems.append(f"with the bug the test file exits {done.returncode}, not 1")
            return problems
        test, error = first_failure(done.stdout)
        if not test.startswith(bug.test_file + "::") or not error:
            problems.append(f"no failing test and error found: {test!r} {error!r}")
            return problems
        alone = run_tests(workspace, pytest_command(["--tb=short", test]))
        if alone.returncode != 1:
            problems.append(f"{test} alone exits {alone.returncode}")
        if bug.test and (bug.test, bug.error) != (test, error):
            problems.append(
                f"recorded {bug.test!r}: {bug.error!r}; the run shows {test!r}: {error!r}"
            )
        entry = next(e for e in suite.raw["bugs"] if e["id"] == bug.id)
        entry["test"], entry["error"] = test, error
    return problems


def verify_group(group: BugGroup, suite: RepoSuite) -> list[str]:
    """What is wrong with ``group`` planted whole (empty: nothing)."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"verify-{group.id}-") as scratch:
        workspace = Path(scratch) / "buggy"
        shutil.copytree(fetch_sdist(suite.pins[group.bugs[0].package]), workspace)
        for bug in group.bugs:
            plant(bug, workspace)
        for bug in group.bugs:
            done = run_tests(workspace, pytest_command(["--tb=short", "-rf", bug.test]))
            if done.returncode != 1 or first_failure(done.stdout) != (bug.test, bug.error):
                problems.append(f"{bug.test} does not fail as recorded with the others planted")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bugs", default="*", help="globs over bug ids, comma-separated (default: all)"
    )
    parser.add_argument("--write", action="store_true", help="record each test and error")
    args = parser.parse_args()
    suite = load_repo_suite()
    bugs = [b for b in suite.bugs if matches(b.id, args.bugs)]
    passed: dict[tuple[str, str], bool] = {}
    bad = 0
    for bug in bugs:
        started = time.perf_counter()
        problems = verify(bug, suite, passed)
        entry = next(e for e in suite.raw["bugs"] if e["id"] == bug.id)
        seconds = time.perf_counter() - started
        if problems:
            bad += 1
            print(f"BAD  {bug.id}  {'; '.join(problems)}", flush=True)
        else:
            print(
                f"ok   {bug.id:<34} {seconds:4.1f} s  {entry['test']}: {entry['error']}", flush=True
            )
    groups = [g for g in suite.groups if matches(g.id, args.bugs)]
    bad_groups = 0
    for group in groups:
        problems = verify_group(group, suite)
        bad_groups += bool(problems)
        print(f"{'BAD ' if problems else 'ok  '} {group.id}  {'; '.join(problems)}", flush=True)
    if args.write:
        REPO_SUITE.write_text(json.dumps(suite.raw, indent=1, ensure_ascii=False) + "\n")
    packages = {b.package for b in bugs}
    print(f"{len(bugs) - bad}/{len(bugs)} bugs verified in {len(packages)} packages")
    if groups:
        print(f"{len(groups) - bad_groups}/{len(groups)} groups of bugs verified")
    return 1 if bad or bad_groups else 0


if __name__ == "__main__":
    sys.exit(main())
