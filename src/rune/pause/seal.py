"""The approval seal: an HMAC-SHA256 over a whole pending state, keyed per user.

A pending state is plain JSON that may be saved and approved later, by another process. The
seal binds every field of it (the request, the prepared change and its preview, the messages,
the queue, the budget used): whoever can edit a saved state cannot recompute the seal without
the key, so ``approve()`` refuses it rather than write new content under an old preview.

The key is 32 random bytes in ``<data dir>/approval.key`` (``rune.paths.seal_key_file``),
created on first use with mode 0600, atomically (a fully written temp file hard-linked into
place, so two processes racing to create it both end up with the same key). The data
directory is one the sandbox never lets the model read or write.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rune.errors import ConfigError
from rune.messages import canonical_json

KEY_BYTES = 32
SEAL_FIELD = "seal"
_PREFIX = "hmac-sha256:"


def sign(state: Mapping[str, Any], key: bytes) -> str:
    """The seal of ``state`` (every field but the seal itself) under ``key``."""
    unsealed = {k: v for k, v in state.items() if k != SEAL_FIELD}
    # The canonical form of the JSON the state travels as: a state that went through a file
    # and back has the same seal as the one in memory.
    payload = canonical_json(json.loads(json.dumps(unsealed, ensure_ascii=False)))
    mac = hmac.new(key, payload.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return _PREFIX + mac.hexdigest()


def verify(state: Mapping[str, Any], key: bytes) -> bool:
    """Whether ``state`` carries the seal ``key`` gives it (compared in constant time)."""
    seal = state.get(SEAL_FIELD)
    return isinstance(seal, str) and hmac.compare_digest(seal, sign(state, key))


def load_or_create_key(path: Path | None = None) -> bytes:
    """The per-user key at ``path`` (default: in Rune's data directory), made on first use."""
    if path is None:
        from rune.paths import seal_key_file

        path = seal_key_file()
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    _create_key(path)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(info.st_mode):
            problem = "is not a regular file"
        elif info.st_uid != os.geteuid():
            problem = "belongs to another user"
        elif stat.S_IMODE(info.st_mode) & 0o077:
            problem = "can be read by other users (it must be mode 600)"
        elif info.st_size != KEY_BYTES:
            problem = f"is {info.st_size} bytes, not {KEY_BYTES}"
        if problem is not None:
            raise ConfigError(
                f"the approval key {path} {problem}. Remove it and Rune makes a new one "
                "(approvals waiting under the old key are then refused)."
            )
        return os.read(fd, KEY_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"cannot read the approval key {path}: {err.strerror or err}") from None
    finally:
        os.close(fd)


def _create_key(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                os.write(fd, secrets.token_bytes(KEY_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
            # link() never replaces: whoever links first wins, and everyone reads that key.
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    except OSError as err:
        raise ConfigError(f"cannot create the approval key {path}: {err.strerror or err}") from None
