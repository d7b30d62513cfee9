"""Progress and control in the real ``rune`` command (issue 11): a status line while the
model thinks, time and tokens per step, Ctrl-C, and a read timeout the user can set, against
real HTTP servers that are slow or never answer; a pty where a terminal matters."""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fakes.cli import closed_port, rune
from tests.fakes.ollama_server import (
    FakeModel,
    FakeOllama,
    Reply,
    chunk,
    final,
    reply,
    text_reply,
    tool_call,
    tool_reply,
)
from tests.fakes.terminal import Terminal

from rune.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / "work").mkdir(parents=True)
    return path


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        yield server


def terminal(home: Path, *args: str, env: dict[str, str]) -> Terminal:
    environment = {
        **os.environ,
        "HOME": str(home),
        "OLLAMA_HOST": f"127.0.0.1:{closed_port()}",
        "TERM": "xterm-256color",
        **env,
    }
    environment.pop("NO_COLOR", None)
    argv = [sys.executable, "-m", "rune.cli", *args]
    return Terminal(argv, env=environment, cwd=home)


class SilentServer:
    """Accepts connections and reads what it is sent, but never answers anything."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def test_a_status_line_moves_while_the_model_thinks_then_the_step_cost(
    home: Path, ollama: FakeOllama
) -> None:
    # Nothing for a while, then tokens one by one: the status line shows both phases.
    pieces = [chunk(piece) for piece in ("The ", "answer ", "is ", "42.")]
    ollama.script(reply(*pieces, final(eval_count=4), stall=1.5, interval=0.4))
    term = terminal(
        home, "run", "--workspace", "work", "what is it", env={"OLLAMA_HOST": ollama.url}
    )
    try:
        term.expect(r"step 1/8: waiting for the model · \d+\.\d s · 0 tokens · Ctrl-C to interrupt")
        term.expect(r"\(step 1/8: \d+\.\d s, 4 tokens\)")
        assert term.wait() == EXIT_OK
    finally:
        term.close()
    assert "The answer is 42." in term.output
    assert "✓ answered, no file changed (step 1/8)" in term.output


def test_without_a_terminal_there_is_no_status_line_and_no_escape_code(
    home: Path, ollama: FakeOllama
) -> None:
    ollama.script(reply(chunk("Hi."), final(eval_count=2), stall=0.6))
    done = rune(home, "run", "--workspace", "work", "hi", env={"OLLAMA_HOST": ollama.url})
    assert done.returncode == EXIT_OK
    assert "\x1b" not in done.stdout + done.stderr
    assert "Ctrl-C to interrupt" not in done.stdout
    assert "(step 1/8:" in done.stdout and "2 tokens)" in done.stdout


def test_ctrl_c_while_the_model_thinks_keeps_the_session_for_resume(
    home: Path, ollama: FakeOllama
) -> None:
    # a change is made, then the model thinks for ever
    write = tool_call("write_file", {"path": "notes.txt", "content": "half done\n"})
    ollama.script(tool_reply(write), Reply(stall=3600))
    term = terminal(
        home,
        "run",
        "--workspace",
        "work",
        "--model",
        "qwen3:latest",
        "--yes",
        "write notes",
        env={"OLLAMA_HOST": ollama.url},
    )
    try:
        term.expect("step 2/8.*waiting for the model .* Ctrl-C to interrupt")
        deadline = time.monotonic() + 30
        while ollama.count("/api/chat") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the stalling request has reached the server (its reply is taken)
        term.send("\x03")
        code = term.wait()
        assert code == EXIT_INTERRUPTED, term.output
    finally:
        term.close()
    assert (home / "work" / "notes.txt").read_text() == "half done\n"
    # what the interrupted run leaves changed, and how to take it back, come first
    assert "the session's file changes stay in place (notes.txt): `rune undo " in term.output
    assert "interrupted; the session is kept: `rune resume" in term.output
    assert "Traceback" not in term.output
    listed = rune(home, "sessions").stdout
    assert " interrupted " in listed
    # resumed, the model answers: the turn did change a file (before the interruption)
    found = re.search(r"\d{8}-\d{6}-[0-9a-f]{6}", listed)
    assert found is not None, listed
    session = found.group(0)
    ollama.script(text_reply("Notes written."))
    resumed = rune(home, "resume", session, "--yes", env={"OLLAMA_HOST": ollama.url})
    assert resumed.returncode == EXIT_OK, resumed.stdout + resumed.stderr
    assert resumed.stdout.strip().splitlines()[-1] == "✓ done (step 1/8)"


@pytest.mark.parametrize("how", ["flag", "environment", "config file"])
def test_the_read_timeout_is_a_setting_and_its_error_names_it(
    home: Path, ollama: FakeOllama, how: str
) -> None:
    ollama.script(Reply(stall=3600))
    args = ["run", "--workspace", "work", "say hi"]
    env = {"OLLAMA_HOST": ollama.url}
    if how == "flag":
        args += ["--timeout", "1"]
    elif how == "environment":
        env["RUNE_TIMEOUT"] = "1"
    else:
        config = Path(os.environ["XDG_CONFIG_HOME"]) / "rune" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("timeout = 1\n", encoding="utf-8")
    done = rune(home, *args, env=env)
    said = done.stdout + done.stderr
    assert done.returncode == EXIT_FAILED
    assert "✗ TransportTimeout" in said
    assert "sent nothing for 1 s" in said
    for name in ("--timeout", "RUNE_TIMEOUT", "config.toml"):
        assert name in said
    assert "--base-url" not in said


def test_a_bad_timeout_is_a_config_error(home: Path) -> None:
    done = rune(home, "run", "--timeout", "0", "x")
    assert done.returncode == 2
    assert "timeout" in done.stderr


def test_a_server_that_hangs_while_asked_about_models_shows_what_rune_waits_for(
    home: Path, silent: SilentServer
) -> None:
    term = terminal(
        home, "run", "--workspace", "work", "--backend", silent.url, "--timeout", "30", "x", env={}
    )
    try:
        term.expect(rf"asking {silent.url}\S* which models it serves · \d+\.\d s · Ctrl-C")
        term.send("\x03")
        code = term.wait()
        assert code == EXIT_INTERRUPTED, term.output
    finally:
        term.close()
    assert "Traceback" not in term.output
