"""A prompt cache that outlives the embedded server: llama.cpp's slot save and restore.

Every ``rune run`` on the embedded backend starts a new llama.cpp server, whose prompt cache is
empty, so the run's first call reads its whole prompt: about 750 tokens on the task suite,
10 of the 13 seconds that call takes on 2 cores. Most of that prompt is the same in every run
(Rune's system prompt, the tools, the protocol's prompt with its worked example: the system
message puts them first, :mod:`rune.operator.blocks`). So :class:`SlotCache`, around the
transport of an embedded server started with a slot directory, restores the state an earlier
run saved (``POST /slots/0?action=restore``) before its first call; llama.cpp then reads only
the tokens after the longest prefix the saved tokens and the new prompt share. After that first
call it saves the slot (``action=save``) when there was nothing to restore or the restored
state served less than :data:`RESAVE_BELOW` tokens (Rune's prompt changed), and the prompt is
at most :data:`SAVE_AT_MOST` tokens: the file is written once, not at every run, and never
for a long resumed session.

The file (about 28 KB per token for Qwen2.5-Coder-1.5B, so some 20 MB) is keyed by the model
file, the window and the llama.cpp build. A file that does not restore (damaged, another
build) costs nothing but the cache: the call goes on as on a fresh server. Correctness never
depends on it: llama.cpp compares the tokens themselves.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from rune.messages import ChatResult
from rune.transport.base import Transport, TransportWrapper

log = logging.getLogger(__name__)

#: a first call that reused fewer prompt tokens than this from the restored state saves anew
RESAVE_BELOW = 256
#: a first call whose prompt is longer is not saved (a resumed session: some 28 KB a token for
#: the 1.5B model; what later runs share is the first ~550 tokens of any prompt)
SAVE_AT_MOST = 2048
#: seconds a save or restore may take (a few tens of MB on a local disk)
SLOT_TIMEOUT_S = 30.0
SLOT = 0


def slot_file_name(model_path: Path, ctx: int, build: str) -> str:
    """The saved state's file name (llama.cpp accepts a bare file name only)."""
    stat = model_path.stat()
    identity = f"{model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{ctx}|{build}"
    return f"prompt-{hashlib.sha256(identity.encode()).hexdigest()[:24]}.slot"


class SlotCache(TransportWrapper):
    """A :class:`Transport` around ``inner`` (an embedded server's) that restores the saved
    prompt cache before the first call and saves it after, as the module says."""

    def __init__(self, inner: Transport, base_url: str, directory: Path, file_name: str) -> None:
        super().__init__(inner)
        self.base_url = base_url.rstrip("/")
        self.path = directory / file_name
        self.file_name = file_name
        self._first = True

    def chat(self, model: str, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        first, self._first = self._first, False
        restored = self._slot("restore") if first and self.path.is_file() else False
        if first and not restored:
            self._slot("erase")  # a shared server: the call starts as on a fresh one
        result = self.inner.chat(model, messages, **kwargs)
        if first:
            reused, length = result.usage.cached_prompt_tokens, result.usage.prompt_tokens
            stale = not restored or (reused is not None and reused < RESAVE_BELOW)
            if stale and length is not None and length <= SAVE_AT_MOST:
                self._slot("save")
        return result

    def _slot(self, action: str) -> bool:
        """One slot action; False (logged) when the server refuses or cannot be reached."""
        body = {} if action == "erase" else {"filename": self.file_name}
        try:
            with httpx.Client(timeout=SLOT_TIMEOUT_S, trust_env=False) as client:
                response = client.post(
                    f"{self.base_url}/slots/{SLOT}", params={"action": action}, json=body
                )
        except httpx.HTTPError as err:
            log.info("prompt cache %s failed: %s", action, err)
            return False
        if response.status_code != 200:
            log.info("prompt cache %s refused: HTTP %s %s", action, response.status_code,
                     response.text[:200])  # fmt: skip
            return False
        return True
