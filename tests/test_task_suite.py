"""The task suites stay honest, with no model and no network: every check fails on its bug (or
stub) and passes on the reference fix, in a fresh interpreter, as ``bench/tasks.py`` runs it;
the repo-level suite's file parses and its pins are exact. Whether each planted bug is caught by
its library's own tests needs PyPI: ``bench/verify_suites.py`` checks that."""

from __future__ import annotations

import argparse
import difflib
import hashlib
import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from tests.fakes.openai_server import MODEL_ID, FakeOpenAIServer

from aider_tasks import prompt_tokens
from aider_tasks import run_task as aider_run_task
from aider_tasks import served as aider_served
from task_suites import (
    ALGO,
    REPO_SUITE,
    SPEC,
    Pin,
    PlantedBug,
    SuiteError,
    Task,
    changed_test_files,
    digest_of_tests,
    fetch_sdist,
    is_test_file,
    load_repo_suite,
    load_suite,
    multi_tasks,
    passing,
    plant,
    pytest_command,
    repo_tasks,
    summary,
)
from tasks import TASKS, check

BUGS = sorted(p for p in TASKS.iterdir() if (p / "check.py").is_file())
ALGOS = sorted(p for p in ALGO.iterdir() if (p / "check.py").is_file())
SPECS = sorted(p for p in SPEC.iterdir() if (p / "task.md").is_file())


def test_every_suite_is_as_large_as_the_issue_asks() -> None:
    assert len(BUGS) >= 12
    assert len(ALGOS) >= 15
    assert len(SPECS) >= 15
    suite = load_repo_suite()
    assert len(suite.bugs) >= 20
    assert len({bug.package for bug in suite.bugs}) >= 3


@pytest.mark.parametrize("task", BUGS + ALGOS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_check_fails_on_the_bug_and_passes_on_the_fix(task: Path, tmp_path: Path) -> None:
    assert (task / "task.md").read_text().strip()
    buggy = tmp_path / "buggy"
    shutil.copytree(task / "workspace", buggy)
    assert not check(task, buggy)
    fixed = tmp_path / "fixed"
    shutil.copytree(task / "workspace", fixed)
    shutil.copytree(task / "solution", fixed, dirs_exist_ok=True)
    assert check(task, fixed)


@pytest.mark.parametrize("task", ALGOS, ids=lambda p: p.name)
def test_an_algorithm_bug_is_one_line_with_no_test_beside_it(task: Path) -> None:
    (source,) = (task / "solution").iterdir()
    buggy = (task / "workspace" / source.name).read_text().splitlines()
    fixed = source.read_text().splitlines()
    changed = [
        line for line in difflib.unified_diff(buggy, fixed, lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("---", "+++"))
    ]  # fmt: skip
    assert len(changed) == 2, changed
    assert [p.name for p in (task / "workspace").iterdir()] == [source.name]
    assert source.name.removesuffix(".py") in (task / "task.md").read_text()


@pytest.mark.parametrize("name", [p.name for p in SPECS])
def test_a_spec_tasks_tests_fail_on_the_stub_and_pass_on_the_solution(
    name: str, tmp_path: Path
) -> None:
    (task,) = load_suite("spec", name)
    (test,) = task.tests
    assert test in task.request
    stub = tmp_path / "stub"
    task.prepare(stub)
    assert "raise NotImplementedError" in "".join(
        p.read_text() for p in stub.glob("*.py") if not is_test_file(p)
    )
    assert not task.check(stub)
    solved = tmp_path / "solved"
    task.prepare(solved)
    shutil.copytree(SPEC / name / "solution", solved, dirs_exist_ok=True)
    assert task.check(solved)


def test_the_repo_suite_pins_exact_versions_and_records_every_failure() -> None:
    raw = json.loads(REPO_SUITE.read_text())
    suite = load_repo_suite()
    assert set(suite.pins) == set(raw["packages"])
    for bug in suite.bugs:
        assert bug.test.startswith(bug.test_file + "::"), bug.id
        assert bug.error and "\n" not in bug.error, bug.id
        assert bug.request().startswith(f"The test {bug.test} fails with: {bug.error}\n")
        assert "the tests are right" in bug.request()
    assert [t.name for t in repo_tasks("toolz-*")] == [
        b.id for b in suite.bugs if b.package == "toolz"
    ]


@pytest.mark.parametrize(
    ("field", "value", "complaint"),
    [
        ("version", ">=1.0", "exact version"),
        ("sha256", "abc", "64 hex"),
    ],
)
def test_a_loose_pin_is_refused(field: str, value: str, complaint: str, tmp_path: Path) -> None:
    raw = json.loads(REPO_SUITE.read_text())
    next(iter(raw["packages"].values()))[field] = value
    path = tmp_path / "repo.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(SuiteError, match=complaint):
        load_repo_suite(path)


def test_a_bug_that_is_not_one_line_or_names_no_test_file_is_refused(tmp_path: Path) -> None:
    raw = json.loads(REPO_SUITE.read_text())
    for change, complaint in [
        ({"new": "a\nb"}, "one changed line"),
        ({"test_file": "pkg/mod.py"}, "not a test file"),
        ({"package": "nothing"}, "unknown package"),
    ]:
        broken = json.loads(json.dumps(raw))
        broken["bugs"][0].update(change)
        path = tmp_path / "repo.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(SuiteError, match=complaint):
            load_repo_suite(path)


def test_the_multi_suite_plants_bugs_of_one_library_each_with_its_own_test() -> None:
    suite = load_repo_suite()
    assert len(suite.groups) >= 4
    tasks = {t.name: t for t in multi_tasks()}
    assert list(tasks) == [g.id for g in suite.groups]
    for group in suite.groups:
        task = tasks[group.id]
        assert len({b.package for b in group.bugs}) == 1 and len(group.bugs) >= 2
        assert len({b.test for b in group.bugs}) == len(group.bugs)
        assert task.tests == tuple(dict.fromkeys(b.test_file for b in group.bugs))
        for bug in group.bugs:
            assert f"- {bug.test} fails with: {bug.error}\n" in task.request
        assert task.request.endswith("(the tests are right) and fix them.")


def test_a_group_of_bugs_of_two_libraries_or_on_one_line_is_refused(tmp_path: Path) -> None:
    raw = json.loads(REPO_SUITE.read_text())
    by_package: dict[str, list[str]] = {}
    for bug in raw["bugs"]:
        by_package.setdefault(bug["package"], []).append(bug["id"])
    two, one = list(by_package.values())[:2]
    for bugs, complaint in [
        ([two[0], one[0]], "bugs of one library"),
        ([two[0], two[0]], "each on its own line"),
        ([two[0]], "two or more"),
        ([two[0], "no-such-bug"], "two or more"),
    ]:
        broken = json.loads(json.dumps(raw))
        broken["multi"] = [{"id": "g", "bugs": bugs}]
        path = tmp_path / "repo.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(SuiteError, match=complaint):
            load_repo_suite(path)


def sdist(tmp_path: Path, stem: str, files: dict[str, str]) -> tuple[Path, str]:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, text in files.items():
            body = text.encode()
            info = tarfile.TarInfo(f"{stem}/{name}")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    archive = tmp_path / f"{stem}.tar.gz"
    archive.write_bytes(data.getvalue())
    return archive, hashlib.sha256(data.getvalue()).hexdigest()


def test_a_cached_sdist_is_unpacked_only_when_its_sha256_matches(tmp_path: Path) -> None:
    archive, digest = sdist(tmp_path, "lib-1.0", {"lib/core.py": "def one():\n    return 1\n"})
    downloads = tmp_path / "cache" / "sdists" / "downloads"
    downloads.mkdir(parents=True)
    shutil.copy(archive, downloads / archive.name)
    with pytest.raises(SuiteError, match="sha256"):
        fetch_sdist(Pin("lib", "1.0", "0" * 64), tmp_path / "cache")
    unpacked = fetch_sdist(Pin("lib", "1.0", digest), tmp_path / "cache")
    assert (unpacked / "lib" / "core.py").read_text() == "def one():\n    return 1\n"


def test_a_bug_is_planted_only_on_the_line_it_names(tmp_path: Path) -> None:
    (tmp_path / "core.py").write_text("def one():\n    return 1\n")
    bug = PlantedBug("b", "lib", "core.py", 2, "    return 1", "    return 2", "t.py", "", "")
    plant(bug, tmp_path)
    assert (tmp_path / "core.py").read_text() == "def one():\n    return 2\n"
    with pytest.raises(SuiteError, match="does not read"):
        plant(bug, tmp_path)


def test_an_edited_or_removed_test_file_is_noticed(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("assert True\n")
    (tmp_path / "conftest.py").write_text("")
    (tmp_path / "lib.py").write_text("x = 1\n")
    before = digest_of_tests(tmp_path)
    assert sorted(before) == ["conftest.py", "tests/test_a.py"]
    (tmp_path / "lib.py").write_text("x = 2\n")
    (tmp_path / "test_new.py").write_text("")
    assert changed_test_files(before, tmp_path) == []
    (tmp_path / "tests" / "test_a.py").write_text("assert 1\n")
    (tmp_path / "conftest.py").unlink()
    assert changed_test_files(before, tmp_path) == ["conftest.py", "tests/test_a.py"]


def test_the_summary_counts_a_false_done_and_aiders_tokens() -> None:
    from task_suites import Row

    line = summary(
        "algo", [Row(True, True, 10.0, 3, 900), Row(False, True, 30.0, 8, 4000),
                 Row(False, False, 20.0, 8, 3000)]
    )  # fmt: skip
    assert "fixed 1/3 (33%)" in line and "false done 1" in line and "median 20.0 s" in line
    assert "calls 8/task (19)" in line and "prompt tokens 3000/task (7900)" in line
    assert prompt_tokens("Tokens: 2.3k sent, 150 received.\nTokens: 812 sent, 9 received.") == 3112


FAKE_AIDER = """#!{python}
import json, os, pathlib, subprocess, sys
if sys.argv[1:] == ["--version"]:
    print("aider 0.0 (fake)")
    sys.exit(0)
record = {{"argv": sys.argv[1:], "git": os.path.isdir(".git")}}
pathlib.Path(os.environ["FAKE_AIDER_LOG"]).write_text(json.dumps(record))
print("Tokens: 1.5k sent, 20 received.")
solution = os.environ.get("FAKE_AIDER_SOLUTION")
if solution:
    for path in pathlib.Path(solution).iterdir():
        pathlib.Path(path.name).write_text(path.read_text())
"""


def fake_aider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, solution: Path | None) -> Path:
    script = tmp_path / "aider"
    script.write_text(FAKE_AIDER.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_AIDER_LOG", str(tmp_path / "argv.json"))
    if solution:
        monkeypatch.setenv("FAKE_AIDER_SOLUTION", str(solution))
    return script


def aider_args(script: Path) -> argparse.Namespace:
    return argparse.Namespace(
        aider=str(script), model="openai/m", base_url="http://127.0.0.1:9/v1", edit_format="",
        timeout=60.0,
    )  # fmt: skip


def test_aider_is_pointed_at_the_server_given_with_the_model_it_serves() -> None:
    # The Aider runner builds the options bench/tasks.py's server_for reads; an option that
    # server gained and this runner lacked once stopped every Aider run before its first task.
    with FakeOpenAIServer() as server:
        args = argparse.Namespace(serve="qwen2.5-coder:1.5b", base_url=f"{server.base_url}/v1/")
        with aider_served(args) as (url, model):
            assert (url, model) == (server.base_url, MODEL_ID)
    assert [r.path for r in server.requests] == ["/v1/models"]


def test_aider_gets_the_stub_the_tests_read_only_and_auto_test_on_a_spec_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (task,) = load_suite("spec", "08_rle")
    script = fake_aider(tmp_path, monkeypatch, SPEC / "08_rle" / "solution")
    scratch = tmp_path / "scratch"
    result = aider_run_task(task, aider_args(script), scratch, tmp_path / "meta.json")
    argv = json.loads((tmp_path / "argv.json").read_text())["argv"]
    assert argv[-1] == "rle.py" and argv[argv.index("--read") + 1] == "test_rle.py"
    assert "--auto-test" in argv and "--no-git" in argv
    assert argv[argv.index("--test-cmd") + 1].endswith("-m unittest -q test_rle.py")
    assert (result.fixed, result.exit0, result.prompt_tokens) == (True, True, 1500)


def test_an_aider_run_that_leaves_the_bug_is_a_false_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (task,) = load_suite("algo", "08_sieve")
    script = fake_aider(tmp_path, monkeypatch, None)
    result = aider_run_task(task, aider_args(script), tmp_path / "s", tmp_path / "meta.json")
    argv = json.loads((tmp_path / "argv.json").read_text())["argv"]
    assert argv[-1] == "primes.py" and "--auto-test" not in argv and "--read" not in argv
    assert (result.fixed, result.exit0) == (False, True)
    assert "false done 1" in summary("algo", [result.row()])


def test_aider_gets_a_git_repository_and_no_file_on_a_repo_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def prepare(workspace: Path) -> None:
        (workspace / "tests").mkdir(parents=True)
        (workspace / "lib.py").write_text("def one():\n    return 2\n")
        (workspace / "tests" / "test_lib.py").write_text(
            "from lib import one\n\ndef test_one():\n    assert one() == 1\n"
        )

    command = pytest_command(["tests/test_lib.py"])
    task = Task("repo", "fake", "The test fails.", prepare, passing(command),
                ("tests/test_lib.py",), command, git=True)  # fmt: skip
    script = fake_aider(tmp_path, monkeypatch, None)
    result = aider_run_task(task, aider_args(script), tmp_path / "s", tmp_path / "meta.json")
    record = json.loads((tmp_path / "argv.json").read_text())
    assert record["git"] and "--no-git" not in record["argv"] and "--read" not in record["argv"]
    argv = record["argv"]
    assert "lib.py" not in argv  # no file: the repo map finds its way
    assert argv[argv.index("--test-cmd") + 1].endswith(
        "pytest -q -p no:cacheprovider tests/test_lib.py"
    )
    assert not result.fixed
