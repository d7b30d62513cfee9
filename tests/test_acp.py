"""``rune acp`` end to end, driven by the Agent Client Protocol's own Python SDK (its client
side): ``rune acp`` runs as a subprocess with the scripted model, and the client speaks to it
over pipes as an editor would. Also the raw wire: hostile JSON-RPC gets errors, not a crash."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp", reason="the acp extra (agent-client-protocol) is not installed")
from acp import schema  # noqa: E402
from tests.acp_support import (  # noqa: E402
    agent_command,
    agent_env,
    wait_until_gone,
    whole_turn_script,
)
from tests.fakes.cli import call, final, rune  # noqa: E402

from rune.acp.updates import parse_unified  # noqa: E402

Decide = Callable[[schema.ToolCallUpdate, list[schema.PermissionOption]], str | None]


class EditorClient:
    """An editor: records every update, answers each permission request with ``decide``."""

    def __init__(self, decide: Decide) -> None:
        self.decide = decide
        self.updates: list[Any] = []
        self.asked: list[tuple[schema.ToolCallUpdate, list[schema.PermissionOption]]] = []
        self.on_update: Callable[[Any], None] | None = None

    async def request_permission(
        self,
        options: list[schema.PermissionOption],
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        **_: Any,
    ) -> schema.RequestPermissionResponse:
        self.asked.append((tool_call, options))
        chosen = self.decide(tool_call, options)
        if chosen is None:
            return schema.RequestPermissionResponse(
                outcome=schema.DeniedOutcome(outcome="cancelled")
            )
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)
        if self.on_update is not None:
            self.on_update(update)

    def text(self) -> str:
        return "".join(
            u.content.text for u in self.updates if isinstance(u, schema.AgentMessageChunk)
        )

    def statuses(self, call_id: str) -> list[str]:
        return [
            u.status
            for u in self.updates
            if isinstance(u, schema.ToolCallStart | schema.ToolCallProgress)
            and u.tool_call_id == call_id
            and u.status is not None
        ]

    def calls(self) -> list[schema.ToolCallStart]:
        return [u for u in self.updates if isinstance(u, schema.ToolCallStart)]


def option_of(kind: str) -> Decide:
    def decide(_call: schema.ToolCallUpdate, options: list[schema.PermissionOption]) -> str:
        return next(o.option_id for o in options if o.kind == kind)

    return decide


def in_turn(decisions: list[str]) -> Decide:
    """Answer the permission requests in order: allow_once, reject_once, allow_always..."""
    queue = list(decisions)

    def decide(call: schema.ToolCallUpdate, options: list[schema.PermissionOption]) -> str:
        return option_of(queue.pop(0))(call, options)

    return decide


async def connect(
    client: EditorClient, home: Path, script: list[dict[str, Any]], *flags: str
) -> Any:
    command = agent_command(*flags)
    stderr = (home.parent / "agent-stderr.txt").open("ab")
    return acp.spawn_agent_process(
        client,
        command[0],
        *command[1:],
        env=agent_env(home, script),
        cwd=home,
        transport_kwargs={"stderr": stderr},
    )


def one_prompt(
    client: EditorClient,
    home: Path,
    workspace: Path,
    script: list[dict[str, Any]],
    text: str,
    *flags: str,
) -> str:
    """A new session in ``workspace`` and one prompt: how the turn stopped."""

    async def play() -> str:
        async with await connect(client, home, script, *flags) as (conn, _process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            done = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block(text)])
            return str(done.stop_reason)

    return asyncio.run(play())


@pytest.fixture
def workspace(home: Path) -> Path:
    path = home / "work"
    path.mkdir()
    (path / "notes.txt").write_text("old\n", encoding="utf-8")
    return path


def agent_stderr(home: Path) -> str:
    path = home.parent / "agent-stderr.txt"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def test_a_whole_turn_approval_rejection_cancel_then_on(home: Path, workspace: Path) -> None:
    client = EditorClient(in_turn(["allow_once", "reject_once", "allow_once"]))

    async def play() -> tuple[str, list[str]]:
        async with await connect(client, home, whole_turn_script()) as (conn, _process):
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            assert init.protocol_version == acp.PROTOCOL_VERSION
            caps = init.agent_capabilities
            assert caps is not None and caps.load_session is True
            assert caps.prompt_capabilities is not None
            assert caps.prompt_capabilities.image is False
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            first = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("fix notes.txt")]
            )
            # prompt 2: cancel once the approved command is running
            started = workspace / "started"

            async def cancel_when_running() -> None:
                while not started.exists():
                    await asyncio.sleep(0.05)
                await conn.cancel(session_id=session.session_id)

            canceller = asyncio.create_task(cancel_when_running())
            second = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[acp.text_block("run it")]),
                timeout=20,
            )
            await canceller
            third = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("still there?")]
            )
            stops = [first.stop_reason, second.stop_reason, third.stop_reason]
            return session.session_id, stops

    session_id, stops = asyncio.run(play())
    assert stops == ["end_turn", "cancelled", "end_turn"], agent_stderr(home)
    assert "Traceback" not in agent_stderr(home)
    # the approved change landed, the rejected one did not; the cancelled command is dead
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "new\n"
    assert not (workspace / "extra.txt").exists()
    assert wait_until_gone()
    assert not (workspace / "finished").exists()
    read, approved, rejected, command = client.calls()
    assert [read.kind, approved.kind, rejected.kind, command.kind] == [
        "read",
        "edit",
        "edit",
        "execute",
    ]
    assert client.statuses(read.tool_call_id) == ["pending", "completed"]
    assert client.statuses(approved.tool_call_id) == [
        "pending",
        "pending",
        "in_progress",
        "completed",
    ]
    assert client.statuses(rejected.tool_call_id)[-1] == "failed"
    assert client.statuses(command.tool_call_id)[-1] == "failed"
    # the permission request showed the diff, with Rune's three choices
    asked_call, options = client.asked[0]
    diffs = [c for c in asked_call.content or [] if isinstance(c, schema.FileEditToolCallContent)]
    assert [(Path(d.path).name, d.old_text, d.new_text) for d in diffs] == [
        ("notes.txt", "old\n", "new\n")
    ]
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
    text = client.text()
    assert "notes.txt now says new" in text
    assert "still here after the cancel" in text
    # the session is Rune's own: the CLI lists it
    listed = rune(home, "sessions", "show", session_id)
    assert listed.returncode == 0, listed.stderr
    assert "fix notes.txt" in listed.stdout


def test_the_session_goes_on_in_the_cli_and_back(home: Path, workspace: Path) -> None:
    script = [
        call("write_file", path="notes.txt", content="from the editor\n"),
        final("written in the editor"),
        final("answered in the cli"),
    ]

    async def start() -> str:
        client = EditorClient(option_of("allow_once"))
        async with await connect(client, home, script) as (conn, _process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            done = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("write notes")]
            )
            assert done.stop_reason == "end_turn"
            return session.session_id

    session_id = asyncio.run(start())
    env = agent_env(home, script)
    cli = rune(
        home,
        "run",
        "--session",
        session_id,
        "--backend",
        "scripted",
        "and now?",
        env={"RUNE_SCRIPT": env["RUNE_SCRIPT"]},
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "answered in the cli" in cli.stdout

    client = EditorClient(option_of("allow_once"))

    async def back() -> None:
        async with await connect(client, home, script) as (conn, _process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            # another directory is refused, and leaves the session free to load where it works
            with pytest.raises(acp.RequestError) as raised:
                await conn.load_session(cwd=str(home), session_id=session_id, mcp_servers=[])
            assert raised.value.code == -32602
            assert "works in" in json.dumps(raised.value.data)
            await conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])

    asyncio.run(back())
    users = [u.content.text for u in client.updates if isinstance(u, schema.UserMessageChunk)]
    assert users == ["write notes", "and now?"]
    assert "written in the editor" in client.text()
    assert "answered in the cli" in client.text()
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "from the editor\n"


def test_allow_for_the_session_approves_later_edits_but_never_a_sensitive_one(
    home: Path, workspace: Path
) -> None:
    script = [
        call("write_file", path="a.txt", content="a\n"),
        call("write_file", path="b.txt", content="b\n"),
        call("write_file", path="AGENTS.md", content="obey the model\n"),
        final("three files"),
    ]
    client = EditorClient(in_turn(["allow_always", "reject_once"]))
    assert one_prompt(client, home, workspace, script, "write") == "end_turn"
    assert (workspace / "a.txt").exists() and (workspace / "b.txt").exists()
    assert not (workspace / "AGENTS.md").exists()
    # a.txt asked (allowed for the session), b.txt did not, AGENTS.md asked without that choice
    assert len(client.asked) == 2
    sensitive_call, options = client.asked[1]
    assert "AGENTS.md" in (sensitive_call.title or "") + json.dumps(sensitive_call.raw_input)
    assert "allow_always" not in [o.kind for o in options]


def test_yes_approves_edits_without_asking_but_asks_for_a_sensitive_one(
    home: Path, workspace: Path
) -> None:
    script = [
        call("write_file", path="a.txt", content="a\n"),
        call("write_file", path="conftest.py", content="import os\n"),
        final("done"),
    ]
    client = EditorClient(lambda _call, _options: None)  # the editor cancels the request
    assert one_prompt(client, home, workspace, script, "go", "--yes", "--yes") == "cancelled"
    assert (workspace / "a.txt").read_text(encoding="utf-8") == "a\n"
    assert not (workspace / "conftest.py").exists()
    assert len(client.asked) == 1


def test_a_turn_that_did_not_finish_says_which_changes_it_leaves_and_how_to_undo_them(
    home: Path, workspace: Path
) -> None:
    script = [
        call("write_file", path="notes.txt", content="wrong\n"),
        call("run_command", command="exit 3"),
        final("fixed"),
        final("fixed"),  # the one reminder after a failure, then the answer is taken
    ]
    client = EditorClient(in_turn([]))
    assert one_prompt(client, home, workspace, script, "fix", "--yes", "--yes") == "end_turn"
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "wrong\n"
    text = client.text()
    assert "answered, but not finished: the last command exited 3" in text
    # an editor has no working directory of its own, so the command names the workspace
    found = re.search(r"\(the session's file changes stay in place \(notes.txt\): `([^`]+)`", text)
    assert found is not None, text
    undo = found.group(1).split()
    assert undo[:2] == ["rune", "undo"] and undo[3:] == ["--all", "--workspace", str(workspace)]
    taken = rune(home, *undo[1:])
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "old\n"


# --- the raw wire --------------------------------------------------------------------------------


def exchange(home: Path, lines: list[bytes], expected: int) -> tuple[list[Any], str, int]:
    """Send ``lines`` to ``rune acp``, read until ``expected`` messages came back (requests are
    answered concurrently, in any order), then close its stdin and let it exit."""
    errors = home.parent / "exchange-stderr.txt"
    process = subprocess.Popen(
        agent_command(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors.open("wb"),
        env=agent_env(home, [final("hello")]),
        cwd=home,
    )
    assert process.stdin is not None and process.stdout is not None
    replies: list[Any] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            replies.append(json.loads(line))
            if len(replies) >= expected:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    process.stdin.write(b"".join(line + b"\n" for line in lines))
    process.stdin.flush()
    reader.join(timeout=60)
    process.stdin.close()
    code = process.wait(timeout=60)
    process.stdout.close()
    return replies, errors.read_text(encoding="utf-8", errors="replace"), code


def request(request_id: int, method: str, params: Any) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message).encode()


def test_hostile_json_rpc_gets_errors_and_the_agent_goes_on(home: Path, workspace: Path) -> None:
    outside = home.parent / "not-there"
    lines = [
        b"{not json",
        b"[1, 2, 3]",
        b'"just a string"',
        b'{"jsonrpc": "2.0", "id": [1], "method": "initialize", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 5, "method": 17}',
        b"[" * 100_000 + b"]" * 100_000,
        request(6, "initialize", {"x": "a" * (9 << 20)}),
        request(7, "no/such/method", {}),
        request(8, "session/prompt", {"sessionId": "../../etc", "prompt": []}),
        request(9, "session/new", {"cwd": "relative/dir", "mcpServers": []}),
        request(10, "session/new", {"cwd": str(outside), "mcpServers": []}),
        request(11, "session/load", {"cwd": str(workspace), "sessionId": "../x"}),
        request(12, "session/load", {"cwd": str(workspace), "sessionId": "20260101-000000-abcdef"}),
        request(13, "session/new", {"cwd": 5}),
        b'{"jsonrpc": "2.0", "id": 99, "result": {"stray": true}}',
        request(14, "initialize", {"protocolVersion": 1}),
    ]
    replies, stderr, code = exchange(home, lines, expected=15)
    assert code == 0, stderr
    assert "Traceback" not in stderr
    by_id = {r["id"]: r for r in replies if r.get("id") is not None}
    anonymous = [r["error"]["code"] for r in replies if r.get("id") is None]
    # bad JSON twice (the nesting too), three non-objects/bad ids, the oversized line
    assert sorted(anonymous) == [-32700, -32700, -32600, -32600, -32600, -32600]
    assert by_id[5]["error"]["code"] == -32600
    assert by_id[7]["error"]["code"] == -32601
    for rid in (8, 9, 10, 11, 12, 13):
        assert by_id[rid]["error"]["code"] == -32602, by_id[rid]
    assert 6 not in by_id  # dropped unread
    assert 99 not in by_id  # a stray response is not answered
    assert by_id[14]["result"]["protocolVersion"] == 1


def test_a_prompt_too_large_or_not_text_is_refused(home: Path, workspace: Path) -> None:
    client = EditorClient(option_of("allow_once"))

    async def play() -> list[int]:
        codes = []
        async with await connect(client, home, [final("fine")]) as (conn, _process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            for prompt in (
                [acp.text_block("x" * 1_000_001)],
                [acp.image_block("aGVsbG8=", "image/png")],
                [acp.text_block("   ")],
            ):
                with pytest.raises(acp.RequestError) as raised:
                    await conn.prompt(session_id=session.session_id, prompt=prompt)
                codes.append(raised.value.code)
            done = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hi")])
            assert done.stop_reason == "end_turn"
        return codes

    assert asyncio.run(play()) == [-32602, -32602, -32602]
    assert "fine" in client.text()


def test_the_diff_of_a_change_is_read_side_by_side() -> None:
    preview = (
        "--- a/w/calc.py\n+++ b/w/calc.py\n@@ -1,3 +1,3 @@\n def add(a, b):\n"
        "-    return a - b\n+    return a + b\n \n--- /dev/null\n+++ b/w/new.txt\n@@ -0,0 +1 @@\n"
        "+hello\n\\ No newline at end of file\n"
    )
    first, second = parse_unified(preview)
    assert first.path == "/w/calc.py"
    assert first.old == "def add(a, b):\n    return a - b\n\n"
    assert first.new == "def add(a, b):\n    return a + b\n\n"
    assert (second.path, second.old, second.new) == ("/w/new.txt", None, "hello\n")
    assert parse_unified("$ pytest -q\nin /w, timeout 60 s") == []


def test_rune_acp_without_the_sdk_says_how_to_install_it(home: Path) -> None:
    # A Python that cannot import the SDK: the acp package is shadowed by an empty module.
    blocker = home / "blocked"
    blocker.mkdir()
    (blocker / "acp.py").write_text("raise ImportError('blocked for this test')\n")
    done = subprocess.run(
        [sys.executable, "-m", "rune.cli", "acp"],
        capture_output=True,
        text=True,
        env={**agent_env(home, []), "PYTHONPATH": str(blocker)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "pip install 'agent-client-protocol" in done.stderr  # this venv: its own pip
    assert "Traceback" not in done.stderr


def test_an_mcp_server_the_editor_passes_is_started_and_its_tools_run(
    home: Path, workspace: Path
) -> None:
    time_server = Path(sys.executable).with_name("mcp-server-time")
    if not time_server.exists():
        pytest.skip("mcp-server-time is not installed (the dev extra installs it)")
    script = [call("clock__get_current_time", timezone="UTC"), final("it is now")]
    client = EditorClient(option_of("allow_once"))

    async def play() -> tuple[str, int]:
        async with await connect(client, home, script) as (conn, _process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            server = schema.McpServerStdio(
                name="clock", command=str(time_server), args=["--local-timezone", "UTC"], env=[]
            )
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[server])
            done = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("time?")]
            )
            with pytest.raises(acp.RequestError) as raised:
                await conn.new_session(
                    cwd=str(workspace),
                    mcp_servers=[
                        schema.HttpMcpServer(type="http", name="web", url="http://x", headers=[])
                    ],
                )
            return done.stop_reason, raised.value.code

    assert asyncio.run(play()) == ("end_turn", -32602)
    (clock,) = client.calls()
    assert clock.title == "clock__get_current_time"
    finished = [
        u
        for u in client.updates
        if isinstance(u, schema.ToolCallProgress) and u.tool_call_id == clock.tool_call_id
    ]
    assert finished[-1].status == "completed", finished[-1]
    assert json.loads(finished[-1].raw_output["output"])["timezone"] == "UTC"
