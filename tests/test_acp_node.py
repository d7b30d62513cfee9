"""``rune acp`` driven by an independent client: the official ACP TypeScript SDK
(``@agentclientprotocol/sdk``, pinned in tests/acp_client/package-lock.json), as an editor
built on it would. ``npm ci`` runs once per test session; without node and npm the test skips.
The SDK checks every message Rune sends against the protocol's schema as it reads it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.acp_support import agent_command, agent_env, wait_until_gone, whole_turn_script

pytest.importorskip("acp", reason="the acp extra (agent-client-protocol) is not installed")

CLIENT = Path(__file__).resolve().parent / "acp_client"


@pytest.fixture(scope="session")
def node_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client script with its pinned SDK installed beside it (once per test session)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the TypeScript SDK's client")
    where = tmp_path_factory.mktemp("acp-client")
    for name in ("package.json", "package-lock.json", "turn.mjs"):
        shutil.copy(CLIENT / name, where / name)
    done = subprocess.run(
        [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return where / "turn.mjs"


def play(
    node_client: Path,
    home: Path,
    workspace: Path,
    script: list[dict[str, Any]],
    prompts: list[dict[str, Any]],
    decisions: list[str],
) -> tuple[dict[str, Any], str]:
    env = agent_env(home, script)
    env.update(
        RUNE_ACP_COMMAND=json.dumps(agent_command()),
        RUNE_ACP_WORKSPACE=str(workspace),
        RUNE_ACP_PROMPTS=json.dumps(prompts),
        RUNE_ACP_DECISIONS=json.dumps(decisions),
    )
    done = subprocess.run(
        ["node", str(node_client)],
        capture_output=True,
        text=True,
        env=env,
        cwd=node_client.parent,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_the_typescript_client_plays_a_whole_turn(node_client: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    workspace = home / "work"
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("old\n", encoding="utf-8")
    prompts = [
        {"text": "fix notes.txt"},
        {"text": "run it", "cancelWhenExists": str(workspace / "started")},
        {"text": "still there?"},
    ]
    result, stderr = play(
        node_client,
        home,
        workspace,
        whole_turn_script(),
        prompts,
        ["allow_once", "reject_once", "allow_once"],
    )
    assert "Traceback" not in stderr
    assert result["exitCode"] == 0
    assert result["init"]["agentCapabilities"]["loadSession"] is True
    assert result["stops"] == ["end_turn", "cancelled", "end_turn"]
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "new\n"
    assert not (workspace / "extra.txt").exists()
    assert wait_until_gone()
    assert not (workspace / "finished").exists()

    transcript = result["transcript"]
    updates = [m["update"] for m in transcript if "update" in m]
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert [c["kind"] for c in calls] == ["read", "edit", "edit", "execute"]

    def statuses(call_id: str) -> list[str]:
        return [
            u["status"]
            for u in updates
            if u["sessionUpdate"] in ("tool_call", "tool_call_update")
            and u["toolCallId"] == call_id
            and "status" in u
        ]

    assert statuses(calls[1]["toolCallId"]) == ["pending", "pending", "in_progress", "completed"]
    assert statuses(calls[2]["toolCallId"])[-1] == "failed"
    assert statuses(calls[3]["toolCallId"])[-1] == "failed"
    asked = [m["permission"] for m in transcript if "permission" in m]
    assert len(asked) == 3
    diff = next(c for c in asked[0]["toolCall"]["content"] if c["type"] == "diff")
    assert (Path(diff["path"]).name, diff["oldText"], diff["newText"]) == (
        "notes.txt",
        "old\n",
        "new\n",
    )
    assert [o["kind"] for o in asked[0]["options"]] == ["allow_once", "allow_always", "reject_once"]
    said = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "notes.txt now says new" in said
    assert "still here after the cancel" in said
    # the cancel came while the approved command ran, and the turn ended right after it
    stops = [i for i, m in enumerate(transcript) if "stop" in m]
    cancel = next(i for i, m in enumerate(transcript) if "cancel" in m)
    assert stops[0] < cancel < stops[1]
