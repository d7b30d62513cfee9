"""The built-in tools on real files: read-only runs, prepared changes, argument checking."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from rune.errors import SandboxDenied, ToolError, ToolInputError
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.files import MIN_READ_LINES
from rune.tools.spec import Executor


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def ex(ws: Path) -> ToolExecutor:
    return ToolExecutor(SandboxPolicy.workspace_only(ws), ws, contain_commands=False)


def test_executor_offers_the_tools_with_json_schemas(ex: ToolExecutor) -> None:
    assert isinstance(ex, Executor)
    names = {s.name: s for s in ex.specs()}
    assert set(names) == {
        "read_file", "list_dir", "search", "replace_function", "write_file", "edit_file",
        "format_code", "run_command",
    }  # fmt: skip
    mutating = {n for n in names if ex.is_mutating(n)}
    assert mutating == {
        "replace_function", "write_file", "edit_file", "format_code", "run_command"
    }  # fmt: skip
    for spec in names.values():
        schema = spec.schema()["function"]["parameters"]
        assert schema["type"] == "object" and set(schema["required"]) <= set(schema["properties"])


@pytest.mark.parametrize(
    ("tool", "args", "problem"),
    [
        ("read_file", {}, "missing required argument 'path'"),
        ("read_file", {"path": 3}, "'path' must be string"),
        ("read_file", {"path": "a", "offset": "2"}, "'offset' must be integer"),
        ("read_file", {"path": "a", "limit": True}, "'limit' must be integer"),
        ("read_file", {"path": "a", "offset": 0}, "at least 1"),
        ("read_file", {"path": "a", "bogus": 1}, "unknown argument 'bogus'"),
        ("search", ["x"], "must be a JSON object"),
        ("run_command", {"command": "ls", "timeout": 99999}, "at most"),
    ],
)
def test_bad_arguments_get_a_tool_error_showing_the_schema(
    ex: ToolExecutor, tool: str, args: object, problem: str
) -> None:
    call = ex.prepare if ex.is_mutating(tool) else ex.run
    with pytest.raises(ToolInputError) as caught:
        call(tool, args)  # type: ignore[arg-type]
    assert problem in str(caught.value) and "Expected schema:" in str(caught.value)


def test_unknown_tool_and_wrong_entry_point(ex: ToolExecutor) -> None:
    with pytest.raises(ToolInputError, match="unknown tool 'rm'"):
        ex.run("rm", {})
    with pytest.raises(ToolError, match="needs approval"):
        ex.run("write_file", {"path": "a", "content": "b"})
    with pytest.raises(ToolError, match="read-only"):
        ex.prepare("read_file", {"path": "a"})


def test_read_file_numbers_lines_and_pages(ex: ToolExecutor, ws: Path) -> None:
    (ws / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    out = ex.run("read_file", {"path": "a.txt", "offset": 3, "limit": 50})
    assert out.splitlines()[:2] == ["     3\tline 3", "     4\tline 4"]
    assert out.splitlines()[49] == "    52\tline 52" and "use offset=53" in out
    # a window too small to read anything by is widened (a model paged 2 lines a turn)
    out = ex.run("read_file", {"path": "a.txt", "offset": 3, "limit": 2})
    assert out.splitlines()[39] == f"    {2 + MIN_READ_LINES}\tline {2 + MIN_READ_LINES}"
    assert f"[showing lines 3-{2 + MIN_READ_LINES} of 100" in out
    assert ex.run("read_file", {"path": "a.txt", "offset": 99, "limit": 2}).endswith("line 100")
    assert ex.run("read_file", {"path": "a.txt", "offset": 101}).endswith("past the end.")
    (ws / "empty").write_text("")
    assert ex.run("read_file", {"path": "empty"}).endswith("is empty.")
    (ws / "bin").write_bytes(b"\x00\x01binary")
    assert "binary file" in ex.run("read_file", {"path": "bin"})
    (ws / "ansi.txt").write_text("\x1b[2Jgone\n")
    assert "\\x1b[2Jgone" in ex.run("read_file", {"path": "ansi.txt"})
    with pytest.raises(ToolError, match="does not exist"):
        ex.run("read_file", {"path": "missing.txt"})
    with pytest.raises(ToolError, match="is a directory"):
        ex.run("read_file", {"path": "."})


def test_list_dir_reports_kinds_without_following(ex: ToolExecutor, ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "f.txt").write_text("abc")
    (ws / "link").symlink_to("sub")
    out = ex.run("list_dir", {"path": "."}).splitlines()
    assert out[0].endswith(": 3 entries")
    assert out[1:] == ["f.txt  (3 bytes)", "link -> sub  [symlink, not followed]", "sub/"]


def test_search_finds_matches_and_skips_what_it_should(ex: ToolExecutor, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("def alpha():\n    return 1\n")
    (ws / "src" / "b.txt").write_text("alpha in text\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("alpha\n")
    (ws / "blob.bin").write_bytes(b"\x00alpha")
    (ws / "linked").symlink_to(ws / "src")
    out = ex.run("search", {"pattern": r"alpha\b"})
    # ripgrep skips binary files (a NUL in the first block) without counting them.
    assert out.splitlines() == ["src/a.py:1: def alpha():", "src/b.txt:1: alpha in text"]
    assert ex.run("search", {"pattern": "alpha", "glob": "*.py"}) == "src/a.py:1: def alpha():"
    assert ex.run("search", {"pattern": "return", "path": "src/a.py"}) == "src/a.py:2:     return 1"
    with pytest.raises(ToolInputError, match="invalid regular expression"):
        ex.run("search", {"pattern": "(unclosed"})


def test_search_caps_its_results(ex: ToolExecutor, ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 500)
    lines = ex.run("search", {"pattern": "hit"}).splitlines()
    assert len(lines) == 101 and lines[-1].startswith("[stopped at 100 matches")


def test_a_gitignore_linked_to_dev_zero_fails_the_search_in_words_within_its_memory(
    ex: ToolExecutor, ws: Path
) -> None:
    """A cloned repository's ``.gitignore`` may be a link to /dev/zero: ripgrep reads it whole
    (4 GiB, then more) before any match. It runs under an address-space limit, and a search it
    could not finish is a failure, never "no matches"."""
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / ".gitignore").symlink_to("/dev/zero")
    with pytest.raises(ToolError, match=r"search failed: ripgrep stopped \(exit status"):
        ex.run("search", {"pattern": "add"})


def test_write_file_prepare_changes_nothing_then_apply_writes(ex: ToolExecutor, ws: Path) -> None:
    change = ex.prepare("write_file", {"path": "new/dir/f.txt", "content": "hello\n"})
    assert not (ws / "new").exists()
    assert change.summary.startswith("write_file: create ")
    assert "+hello" in change.preview and "--- /dev/null" in change.preview
    assert ex.apply(change).startswith("wrote ")
    assert (ws / "new/dir/f.txt").read_text() == "hello\n"
    assert [p.name for p in (ws / "new/dir").iterdir()] == ["f.txt"]  # no temp file left


def test_write_file_keeps_the_mode_and_refuses_a_stale_change(ex: ToolExecutor, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o750)
    change = ex.prepare("write_file", {"path": "run.sh", "content": "echo 2\n"})
    ex.apply(change)
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    script.write_text("echo 3\n")
    with pytest.raises(ToolError, match="changed since this change was prepared"):
        ex.apply(change)  # the file now differs from what the change was prepared against
    assert script.read_text() == "echo 3\n"
    with pytest.raises(ToolError, match="nothing to change"):
        ex.prepare("write_file", {"path": "run.sh", "content": "echo 3\n"})


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "m.py", "content": "a = 2\n"}),
        ("edit_file", {"path": "m.py", "old_text": "a = 1", "new_text": "a = 2"}),
    ],
)
def test_applying_an_applied_change_again_writes_nothing_and_succeeds(
    ex: ToolExecutor, ws: Path, tool: str, args: dict[str, str]
) -> None:
    # A process killed between writing and journaling it resumes the same approval.
    (ws / "m.py").write_text("a = 1\n")
    change = ex.prepare(tool, args)
    ex.apply(change)
    before = (ws / "m.py").stat()
    assert "already has the approved content" in ex.apply(change)
    after = (ws / "m.py").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert (ws / "m.py").read_text() == "a = 2\n"


def test_preview_escapes_hidden_characters_in_content(ex: ToolExecutor) -> None:
    change = ex.prepare("write_file", {"path": "x.txt", "content": "ok\x1b[8mhidden\u202e\n"})
    assert "\x1b" not in change.preview and "\u202e" not in change.preview
    assert "\\x1b[8mhidden\\u202e" in change.preview
    assert "2 control or invisible character(s)" in change.preview


def test_edit_file_needs_exactly_one_match(ex: ToolExecutor, ws: Path) -> None:
    (ws / "m.py").write_text("a = 1\nb = 1\n")
    for old, count in (("= 1", 2), ("zzz", 0)):
        with pytest.raises(ToolError, match=f"matches {count} times"):
            ex.prepare("edit_file", {"path": "m.py", "old_text": old, "new_text": "x"})
    change = ex.prepare("edit_file", {"path": "m.py", "old_text": "b = 1", "new_text": "b = 2"})
    assert "-b = 1\n+b = 2" in change.preview
    ex.apply(change)
    assert (ws / "m.py").read_text() == "a = 1\nb = 2\n"
    with pytest.raises(ToolError, match="does not exist"):
        ex.prepare("edit_file", {"path": "nope.py", "old_text": "a", "new_text": "b"})


def test_format_code_formats_python_with_ruff(ex: ToolExecutor, ws: Path) -> None:
    (ws / "ugly.py").write_text("x=[1,2 ,3]\ndef f( a ):\n  return a\n")
    change = ex.prepare("format_code", {"path": "ugly.py"})
    assert (ws / "ugly.py").read_text().startswith("x=[1,2 ,3]")  # prepare changed nothing
    assert "+x = [1, 2, 3]" in change.preview
    assert sorted(os.listdir(ws)) == ["ugly.py"]  # and left no copy or cache behind
    ex.apply(change)
    assert (ws / "ugly.py").read_text() == "x = [1, 2, 3]\n\n\ndef f(a):\n    return a\n"
    with pytest.raises(ToolError, match="nothing to change"):
        ex.prepare("format_code", {"path": "ugly.py"})


def test_format_code_errors_are_clear(
    ex: ToolExecutor, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "page.html").write_text("<p>\n")
    with pytest.raises(ToolError, match=r"no formatter for .*page\.html"):
        ex.prepare("format_code", {"path": "page.html"})
    (ws / "broken.py").write_text("def (:\n")
    with pytest.raises(ToolError, match="ruff could not format"):
        ex.prepare("format_code", {"path": "broken.py"})
    monkeypatch.setattr(sys, "executable", str(ws / "no-python-here"))
    monkeypatch.setenv("PATH", str(ws))
    (ws / "ok.py").write_text("x=1\n")
    with pytest.raises(ToolError, match="ruff is not installed"):
        ex.prepare("format_code", {"path": "ok.py"})


def test_write_denials_reach_the_model_as_sandbox_denied(ex: ToolExecutor, ws: Path) -> None:
    with pytest.raises(SandboxDenied, match="outside allowed write directories"):
        ex.prepare("write_file", {"path": "/etc/nope.txt", "content": ""})
    with pytest.raises(SandboxDenied, match="is protected"):
        ex.prepare("edit_file", {"path": ".git/config", "old_text": "a", "new_text": "b"})
