"""The embedded server's prompt cache outlives it (rune.transport.prompt_cache): a real
llama.cpp server with the real demo model saves its slot after a run's first call, and the
next server, started fresh as the next ``rune run`` starts one, restores it and reads only the
new tokens."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from live.server import unavailable
from rune.errors import RuneError
from rune.messages import ChatResult
from rune.models.embedded import EmbeddedLlamaServer, demo_model_path
from rune.transport.openai_compat import OpenAICompatTransport
from rune.transport.prompt_cache import RESAVE_BELOW, SlotCache

pytestmark = pytest.mark.live

#: long enough that the shared part is well over RESAVE_BELOW tokens
SHARED = "You are a careful assistant. " + " ".join(f"Rule {n}: be exact." for n in range(90))


def ask(slots: Path, question: str) -> tuple[ChatResult, ChatResult]:
    """A fresh server, as one ``rune run`` starts it: its first call and a second one."""
    model_path = demo_model_path()
    if model_path is None:
        unavailable("the demo model is not installed")
    try:
        server = EmbeddedLlamaServer(model_path, ctx=2048, slot_dir=slots)
        server.start()
    except RuneError as err:
        unavailable(str(err))
    try:
        with OpenAICompatTransport(server.base_url) as inner:
            cache = SlotCache(inner, server.base_url, slots, server.slot_file_name())
            messages = [
                {"role": "system", "content": SHARED},
                {"role": "user", "content": question},
            ]
            options = {"temperature": 0, "num_predict": 4}
            first = cache.chat(server.model, messages, options=options)
            second = cache.chat(server.model, messages, options=options)
            return first, second
    finally:
        server.stop()


@pytest.fixture
def slots(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "prompt-cache"


def cached(result: ChatResult) -> int:
    reused = result.usage.cached_prompt_tokens
    assert reused is not None, "llama.cpp reports the cached tokens"
    return reused


def test_a_fresh_server_reads_the_shared_prefix_from_the_saved_slot(slots: Path) -> None:
    first, _ = ask(slots, "Say yes.")
    assert cached(first) == 0  # nothing saved yet: the whole prompt is read
    [saved] = slots.iterdir()
    assert saved.stat().st_size > 0
    # it holds the prompt's tokens, the workspace's files among them: the user's alone
    assert stat.S_IMODE(slots.stat().st_mode) == 0o700
    written = saved.stat().st_mtime_ns

    first, second = ask(slots, "Say no.")
    prompt = first.usage.prompt_tokens
    assert prompt is not None
    assert RESAVE_BELOW <= cached(first) < prompt  # the shared prefix came from the file
    assert cached(second) >= cached(first)  # and the server's own cache works as before
    assert saved.stat().st_mtime_ns == written  # served well: not written again


def test_a_damaged_slot_file_costs_only_the_cache_and_is_written_anew(slots: Path) -> None:
    ask(slots, "Say yes.")
    [saved] = slots.iterdir()
    saved.write_bytes(b"not a llama.cpp state file")
    first, _ = ask(slots, "Say no.")
    assert cached(first) == 0 and first.message["role"] == "assistant"
    assert saved.stat().st_size > 100  # saved again from this run

    first, _ = ask(slots, "Say maybe.")
    assert cached(first) >= RESAVE_BELOW


def test_a_long_first_prompt_is_not_saved(slots: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (a resumed session's first call: the file would grow with it, and later runs share only
    # the start of any prompt)
    monkeypatch.setattr("rune.transport.prompt_cache.SAVE_AT_MOST", 64)
    first, _ = ask(slots, "Say yes.")
    assert first.usage.prompt_tokens is not None and first.usage.prompt_tokens > 64
    assert list(slots.iterdir()) == []
