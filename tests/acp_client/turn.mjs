// An editor stand-in: the official ACP TypeScript SDK's client drives `rune acp` through whole
// prompt turns, answers each permission request from a list, cancels a turn when asked, and
// prints one JSON line: what it got back and every message it saw (tests/test_acp_node.py).
//
// Environment: RUNE_ACP_COMMAND (JSON argv of the agent), RUNE_ACP_WORKSPACE (the session's
// cwd), RUNE_ACP_DECISIONS (JSON list of option kinds: allow_once, allow_always, reject_once),
// RUNE_ACP_PROMPTS (JSON list of {text, cancelWhenExists?}: a path whose appearance cancels).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { once } from "node:events";
import { Readable, Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import * as acp from "@agentclientprotocol/sdk";

const [command, ...args] = JSON.parse(process.env.RUNE_ACP_COMMAND);
const workspace = process.env.RUNE_ACP_WORKSPACE;
const decisions = JSON.parse(process.env.RUNE_ACP_DECISIONS ?? "[]");
const prompts = JSON.parse(process.env.RUNE_ACP_PROMPTS);

const agentProcess = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(
  Writable.toWeb(agentProcess.stdin),
  Readable.toWeb(agentProcess.stdout),
);
const transcript = [];

const app = acp
  .client({ name: "rune-test-client" })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    const kind = decisions.shift();
    const option = params.options.find((o) => o.kind === kind);
    transcript.push({ permission: params, chose: option ? option.optionId : null });
    if (!option) {
      return { outcome: { outcome: "cancelled" } };
    }
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    transcript.push({ update: params.update });
  });

async function cancelWhen(agent, sessionId, path) {
  const deadline = Date.now() + 30_000;
  while (!existsSync(path)) {
    if (Date.now() > deadline) throw new Error(`${path} never appeared`);
    await sleep(50);
  }
  transcript.push({ cancel: sessionId });
  await agent.notify(acp.methods.agent.session.cancel, { sessionId });
}

const result = await app.connectWith(stream, async (agent) => {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  const session = await agent.request(acp.methods.agent.session.new, {
    cwd: workspace,
    mcpServers: [],
  });
  const stops = [];
  for (const { text, cancelWhenExists } of prompts) {
    transcript.push({ prompt: text });
    const cancelling = cancelWhenExists
      ? cancelWhen(agent, session.sessionId, cancelWhenExists)
      : null;
    const response = await agent.request(acp.methods.agent.session.prompt, {
      sessionId: session.sessionId,
      prompt: [{ type: "text", text }],
    });
    if (cancelling) await cancelling;
    transcript.push({ stop: response.stopReason });
    stops.push(response.stopReason);
  }
  return { init, sessionId: session.sessionId, stops };
});

agentProcess.stdin.end();
const [code] = await once(agentProcess, "exit");
process.stdout.write(JSON.stringify({ ...result, exitCode: code, transcript }) + "\n");
