"""The benchmark suites: what each task's workspace holds, what the user types, and how the
result is checked. No model and no Rune here: ``tasks.py`` (Rune) and ``aider_tasks.py``
(Aider) run these tasks, and ``verify_suites.py`` checks the repo-level bugs against PyPI.

- ``bugs``: the 16 small bugs of ``bench/tasks/`` (a ``check.py`` run after the run).
- ``algo``: one-line bugs in textbook algorithms (``bench/suites/algo/``), only the docstring
  to go on; the check is a hidden test (``check.py``, never in the workspace).
- ``spec``: functions written from a docstring (``bench/suites/spec/``): a stub and its test
  file in the workspace; the check runs that test file, which must be unchanged.
- ``repo``: one-line bugs planted in real pure-Python libraries (``bench/suites/repo.json``):
  the pinned sdist is fetched from PyPI (sha256 verified) into a cache, unpacked into the
  workspace and the bug applied as an exact line replacement; the check runs the library's
  own test file, which must be unchanged.
- ``multi``: two of the ``repo`` bugs planted at once in one library (``"multi"`` in
  ``repo.json``), each with its own failing test, as a project with several bugs is; the check
  runs both test files.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
TASKS = BENCH / "tasks"
SUITES_DIR = BENCH / "suites"
ALGO = SUITES_DIR / "algo"
SPEC = SUITES_DIR / "spec"
REPO_SUITE = SUITES_DIR / "repo.json"
SUITE_NAMES = ("bugs", "algo", "spec", "repo", "multi")
CHECK_TIMEOUT_S = 20
TEST_TIMEOUT_S = 180
# What a check or a test run sees of the environment: the model's code never runs in the
# runner's own interpreter, and writes no bytecode into the workspace.
CHECK_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}


class SuiteError(Exception):
    """A suite file or a pinned download is not what it should be."""


@dataclass(frozen=True)
class Task:
    suite: str
    name: str
    request: str
    prepare: Callable[[Path], None]
    """Fills the workspace (a directory that does not exist yet)."""
    check: Callable[[Path], bool]
    """True when the workspace is fixed (test files unchanged are checked apart)."""
    tests: tuple[str, ...] = ()
    """The test files the check runs, relative to the workspace (empty: a hidden check)."""
    test_command: tuple[str, ...] = ()
    """The command that runs them in the workspace (the check; Aider's ``--test-cmd``)."""
    git: bool = False
    """A repository, not a handful of files: Aider gets git and its repo map."""


def pytest_command(tests: Sequence[str]) -> tuple[str, ...]:
    return (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests)


def unittest_command(tests: Sequence[str]) -> tuple[str, ...]:
    """The spec suite's test files are plain unittest: no pytest start-up per check."""
    return (sys.executable, "-m", "unittest", "-q", *tests)


def check(task: Path, workspace: Path) -> bool:
    """The task's ``check.py`` in a fresh interpreter (the model's code never runs in this one)."""
    code = (task / "check.py").read_text(encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=workspace,
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
            env=CHECK_ENV,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def run_tests(workspace: Path, command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """A test command in a fresh interpreter, from the workspace's root; pytest without the
    plugins this venv happens to hold (the libraries' tests need none of them)."""
    try:
        return subprocess.run(
            command,
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=TEST_TIMEOUT_S,
            env={**CHECK_ENV, "HOME": str(workspace), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, 124, "", f"timeout after {exc.timeout} s")


def passing(command: tuple[str, ...]) -> Callable[[Path], bool]:
    """The check of a suite with tests: they pass in the workspace."""
    return lambda workspace: run_tests(workspace, command).returncode == 0


def is_test_file(path: Path) -> bool:
    name = path.name
    return name == "conftest.py" or (
        name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
    )


def digest_of_tests(workspace: Path) -> dict[str, str]:
    """sha256 of every test file in the workspace, by relative path."""
    return {
        str(p.relative_to(workspace)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(workspace.rglob("*.py"))
        if p.is_file() and is_test_file(p)
    }


def changed_test_files(before: dict[str, str], workspace: Path) -> list[str]:
    """The test files of ``before`` that were edited or removed since (new ones do not count)."""
    after = digest_of_tests(workspace)
    return [name for name, digest in before.items() if after.get(name) != digest]


# -- directory suites: bugs, algo, spec -------------------------------------------------------


def dir_task(suite: str, path: Path) -> Task:
    """A task directory: ``task.md``, ``workspace/``, and ``check.py`` or test files."""
    request = (path / "task.md").read_text(encoding="utf-8").strip()

    def prepare(workspace: Path) -> None:
        shutil.copytree(path / "workspace", workspace, dirs_exist_ok=True)

    tests = tuple(sorted(p.name for p in (path / "workspace").glob("*.py") if is_test_file(p)))
    if (path / "check.py").is_file():
        return Task(suite, path.name, request, prepare, lambda ws: check(path, ws))
    if not tests:
        raise SuiteError(f"{path}: neither check.py nor a test file in workspace/")
    command = unittest_command(tests)
    return Task(suite, path.name, request, prepare, passing(command), tests, command)


def matches(name: str, pattern: str) -> bool:
    """``pattern`` is one glob or several separated by commas."""
    return any(fnmatch.fnmatch(name, glob) for glob in pattern.split(","))


def dir_tasks(suite: str, root: Path, pattern: str = "*") -> list[Task]:
    return [
        dir_task(suite, p)
        for p in sorted(root.iterdir())
        if (p / "task.md").is_file() and matches(p.name, pattern)
    ]


# -- the repo-level suite ----------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: str

    @property
    def stem(self) -> str:
        """The sdist's top directory and file stem, as pip names it."""
        return f"{self.name}-{self.version}"


@dataclass(frozen=True)
class PlantedBug:
    id: str
    package: str
    file: str
    line: int
    old: str
    new: str
    test_file: str
    test: str
    error: str

    def request(self) -> str:
        return (
            f"The test {self.test} fails with: {self.error}\n"
            "Find the bug in the library code (the tests are right) and fix it."
        )


def several_request(bugs: Sequence[PlantedBug]) -> str:
    """What a user reports when several tests fail: each test and its error, one a line."""
    failing = "".join(f"- {bug.test} fails with: {bug.error}\n" for bug in bugs)
    return (
        f"These tests fail:\n{failing}"
        "Find the bugs in the library code (the tests are right) and fix them."
    )


@dataclass(frozen=True)
class BugGroup:
    """Bugs of one library planted together (the ``multi`` suite)."""

    id: str
    bugs: tuple[PlantedBug, ...]


@dataclass(frozen=True)
class RepoSuite:
    pins: dict[str, Pin]
    bugs: list[PlantedBug]
    raw: dict[str, Any]
    groups: tuple[BugGroup, ...] = ()


def load_repo_suite(path: Path = REPO_SUITE) -> RepoSuite:
    """The suite file, with every field checked (a typo fails here, not mid-run)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    pins: dict[str, Pin] = {}
    for name, entry in raw["packages"].items():
        version, digest = entry["version"], entry["sha256"]
        if not (isinstance(version, str) and version and all(c in "0123456789." for c in version)):
            raise SuiteError(f"{name}: an exact version is needed, not {version!r}")
        if not (len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
            raise SuiteError(f"{name}: sha256 {digest!r} is not 64 hex digits")
        pins[name] = Pin(name, version, digest)
    bugs: list[PlantedBug] = []
    for entry in raw["bugs"]:
        bug = PlantedBug(**entry)
        if bug.package not in pins:
            raise SuiteError(f"{bug.id}: unknown package {bug.package!r}")
        if bug.old == bug.new or "\n" in bug.old + bug.new or bug.line < 1:
            raise SuiteError(f"{bug.id}: a bug is one changed line")
        if not is_test_file(Path(bug.test_file)) or bug.file == bug.test_file:
            raise SuiteError(f"{bug.id}: {bug.test_file} is not a test file")
        bugs.append(bug)
    ids = [b.id for b in bugs]
    if len(set(ids)) != len(ids):
        raise SuiteError("bug ids repeat")
    by_id = {b.id: b for b in bugs}
    groups: list[BugGroup] = []
    for entry in raw.get("multi", []):
        members = tuple(by_id[i] for i in entry["bugs"] if i in by_id)
        if len(members) != len(entry["bugs"]) or len(members) < 2:
            raise SuiteError(f"{entry['id']}: two or more known bugs are needed")
        places = {(b.file, b.line) for b in members}
        if len({b.package for b in members}) != 1 or len(places) != len(members):
            raise SuiteError(f"{entry['id']}: bugs of one library, each on its own line")
        groups.append(BugGroup(entry["id"], members))
    return RepoSuite(pins, bugs, raw, tuple(groups))


def cache_dir() -> Path:
    base = os.environ.get("RUNE_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rune-bench"
    )
    return Path(base)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_sdist(pin: Pin, cache: Path | None = None) -> Path:
    """The pinned sdist, unpacked once into the cache: ``pip download`` of the exact version,
    its sha256 checked before anything is unpacked."""
    root = (cache or cache_dir()) / "sdists"
    unpacked = root / pin.stem / pin.stem
    if unpacked.is_dir():
        return unpacked
    downloads = root / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    archive = downloads / f"{pin.stem}.tar.gz"
    if not archive.is_file():
        with tempfile.TemporaryDirectory(dir=downloads) as scratch:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                 "--no-binary", ":all:", f"{pin.name}=={pin.version}", "-d", scratch],
                check=True,
            )  # fmt: skip
            got = [p for p in Path(scratch).iterdir() if p.name.endswith(".tar.gz")]
            if len(got) != 1:
                raise SuiteError(f"{pin.stem}: pip downloaded {[p.name for p in got]}")
            digest = sha256_of(got[0])
            if digest != pin.sha256:
                raise SuiteError(f"{pin.stem}: sha256 {digest}, pinned {pin.sha256}")
            got[0].replace(archive)
    digest = sha256_of(archive)
    if digest != pin.sha256:
        raise SuiteError(f"{archive}: sha256 {digest}, pinned {pin.sha256}")
    with tempfile.TemporaryDirectory(dir=root) as scratch, tarfile.open(archive) as tar:
        tar.extractall(scratch, filter="data")
        if not (Path(scratch) / pin.stem).is_dir():
            raise SuiteError(f"{archive}: no top directory {pin.stem}/")
        target = root / pin.stem
        target.mkdir(parents=True, exist_ok=True)
        (Path(scratch) / pin.stem).replace(unpacked)
    return unpacked


#: the test runner a library's developer has in the project's .venv (the repo suite's)
PROJECT_PYTEST = "pytest==8.4.2"


def project_venv(cache: Path | None = None) -> Path:
    """A virtual environment with pytest, made once in the cache and copied into each repo
    task's workspace as its ``.venv``: a library checkout as its developer has it, so Rune runs
    the library's tests with the project's interpreter (never its own), as for a user."""
    root = cache or cache_dir()
    venv = root / ("project-venv-" + PROJECT_PYTEST.replace("==", "-"))
    if (venv / ".complete").is_file():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", PROJECT_PYTEST],
        check=True,
        capture_output=True,
    )
    (venv / ".complete").write_text("")
    return venv


def copy_venv(venv: Path, target: Path) -> None:
    """``venv`` copied to ``target`` as if made there: its scripts (``bin/pytest``...) name
    their interpreter by absolute path, which must be the copy's (the original is outside the
    workspace, where a contained command cannot see it)."""
    shutil.copytree(venv, target, symlinks=True, ignore=shutil.ignore_patterns(".complete"))
    old, new = str(venv).encode(), str(target).encode()
    for script in (target / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if old in data:
                script.write_bytes(data.replace(old, new))


def plant(bug: PlantedBug, workspace: Path) -> None:
    """Replace the bug's line (which must read exactly ``old``) with ``new``."""
    path = workspace / bug.file
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if len(lines) < bug.line or lines[bug.line - 1].rstrip("\r\n") != bug.old:
        raise SuiteError(f"{bug.id}: {bug.file}:{bug.line} does not read {bug.old!r}")
    ending = lines[bug.line - 1][len(bug.old) :]
    lines[bug.line - 1] = bug.new + ending
    path.write_text("".join(lines), encoding="utf-8")


def repo_tasks(pattern: str = "*", suite: RepoSuite | None = None) -> list[Task]:
    loaded = suite or load_repo_suite()
    return [
        planted_task("repo", bug.id, (bug,), bug.request(), loaded)
        for bug in loaded.bugs
        if matches(bug.id, pattern)
    ]


def multi_tasks(pattern: str = "*", suite: RepoSuite | None = None) -> list[Task]:
    loaded = suite or load_repo_suite()
    return [
        planted_task("multi", group.id, group.bugs, several_request(group.bugs), loaded)
        for group in loaded.groups
        if matches(group.id, pattern)
    ]


def planted_task(
    suite: str, name: str, bugs: tuple[PlantedBug, ...], request: str, loaded: RepoSuite
) -> Task:
    """The library of ``bugs`` (one package) with each of them planted; the check runs each
    one's test file."""
    pin = loaded.pins[bugs[0].package]

    def prepare(workspace: Path) -> None:
        shutil.copytree(fetch_sdist(pin), workspace, dirs_exist_ok=True)
        for bug in bugs:
            plant(bug, workspace)
        copy_venv(project_venv(), workspace / ".venv")

    tests = tuple(dict.fromkeys(bug.test_file for bug in bugs))
    command = pytest_command(tests)
    return Task(suite, name, request, prepare, passing(command), tests, command, True)


def load_suite(name: str, pattern: str = "*") -> list[Task]:
    if name == "bugs":
        return dir_tasks("bugs", TASKS, pattern)
    if name == "algo":
        return dir_tasks("algo", ALGO, pattern)
    if name == "spec":
        return dir_tasks("spec", SPEC, pattern)
    if name == "repo":
        return repo_tasks(pattern)
    if name == "multi":
        return multi_tasks(pattern)
    raise SuiteError(f"no suite {name!r}; one of {', '.join(SUITE_NAMES)}")


def selected(suite: str) -> list[str]:
    return list(SUITE_NAMES) if suite == "all" else [suite]


# -- the report both runners print ------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One run of one task, whoever ran it."""

    fixed: bool
    exit0: bool
    seconds: float
    calls: int
    prompt_tokens: int


def summary(suite: str, rows: Iterable[Row]) -> str:
    """fixed, false ``done`` (exit 0 while the check fails), median seconds, model calls and
    prompt tokens (median per task, total)."""
    got = list(rows)
    if not got:
        return f"{suite:<5} no tasks"
    n = len(got)
    fixed = sum(r.fixed for r in got)
    false_done = sum(r.exit0 and not r.fixed for r in got)
    calls = [r.calls for r in got]
    tokens = [r.prompt_tokens for r in got]
    return (
        f"{suite:<5} fixed {fixed}/{n} ({100 * fixed / n:.0f}%)  false done {false_done}  "
        f"median {statistics.median(r.seconds for r in got):.1f} s  "
        f"calls {statistics.median(calls):g}/task ({sum(calls)})  "
        f"prompt tokens {statistics.median(tokens):g}/task ({sum(tokens)})"
    )
