"""Record what a real local model answers to Rune's text-fallback prompt.

Sends the runtime's own fallback prompt (built from the built-in tools) plus a few coding
tasks to an OpenAI-compatible server (llama.cpp's llama-server, vLLM, LM Studio) at several
temperatures and seeds, and prints one JSON line per reply, with what the parser makes of it.
The replies are raw material for tests/corpus/fallback_replies.jsonl: a human labels the calls
in each one; the parser's opinion printed here is for reviewing, never the label.

``--prefill`` starts the assistant turn with ``<tool_call>`` (llama-server continues a final
assistant message) and records prefill + continuation: a model too small to call on its own
then shows what its attempted calls really look like.

    llama-server -m SmolLM2-135M-Instruct.Q4_1.gguf --port 18100   # or any local server
    .venv/bin/python bench/record_fallback_replies.py --base-url http://127.0.0.1:18100
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile

import httpx

from rune.formats.fallback import CALL_OPEN, fallback_prompt, parse_tool_calls
from rune.tools.executor import ToolExecutor

TASKS = (
    "Read the file main.py and tell me what it does.",
    "There is a bug in utils.py: add() subtracts. Fix it.",
    "List what is in the src directory.",
    "Create a file hello.txt containing the text Hello.",
    "Show me the first 10 lines of README.md.",
    "What is 2 + 2?",
    "Write a Python function that reverses a string into rev.py.",
)
TEMPERATURES = (0.0, 0.7, 1.0)
SEEDS = (1, 2)


def record(
    base_url: str, model: str, max_tokens: int, label: str, prefill: str = ""
) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as workspace:
        specs = ToolExecutor(workspace=workspace).specs()
    known = {spec.name for spec in specs}
    system = fallback_prompt(specs)
    rows: list[dict[str, object]] = []
    with httpx.Client(base_url=base_url, timeout=600) as client:
        for (t, task), temperature, seed in itertools.product(
            enumerate(TASKS), TEMPERATURES, SEEDS
        ):
            if temperature == 0.0 and seed != SEEDS[0]:
                continue  # greedy decoding ignores the seed
            response = client.post(
                "/v1/chat/completions",
                json={
                    "model": model,
                    "messages": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": task},
                        *([{"role": "assistant", "content": prefill}] if prefill else []),
                    ],
                    "max_tokens": max_tokens,
                    "temperature": temperature,
                    "seed": seed,
                },
            )
            response.raise_for_status()
            reply = response.json()["choices"][0]["message"].get("content") or ""
            if not reply.startswith(prefill):
                reply = prefill + reply  # servers differ: llama-server echoes the prefill
            parsed = parse_tool_calls(reply, known)
            row = {
                "id": f"rec-{label}{'-prefill' if prefill else ''}-t{t}-temp{temperature}-s{seed}",
                "task": task,
                "temperature": temperature,
                "seed": seed,
                "reply": reply,
                "origin": f"recorded:{label}{'+prefill' if prefill else ''}",
                "parser_says": {
                    "calls": [{"name": c.name, "arguments": c.arguments} for c in parsed.calls],
                    "error": parsed.error,
                },
            }
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:18100")
    parser.add_argument("--model", default="local", help="model name sent in the request")
    parser.add_argument("--label", default="smollm2-135m", help="origin label: recorded:<label>")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--prefill", action="store_true", help="start the assistant turn with <tool_call>"
    )
    args = parser.parse_args(argv)
    prefill = CALL_OPEN if args.prefill else ""
    rows = record(args.base_url, args.model, args.max_tokens, args.label, prefill)
    print(f"recorded {len(rows)} replies", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
