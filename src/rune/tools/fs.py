"""File access that strings cannot trick: no-follow opens relative to directory handles.

Paths arrive here already validated by ``rune.tools.sandbox``; these functions make sure the
file actually touched is the one that was validated, even if a symlink is swapped in between
(sandbox-security.md P6/P7). ``atomic_write`` is the only code in Rune that opens a file for
writing in the user's tree.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from rune.errors import SandboxDenied, ToolError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _root_of(path: Path, roots: Sequence[Path]) -> Path:
    matches = [r for r in roots if path == r or path.is_relative_to(r)]
    if not matches:
        raise SandboxDenied(f"Access denied: {path} is outside {[str(r) for r in roots]}.")
    return max(matches, key=lambda r: len(r.parts))


@contextlib.contextmanager
def open_parent(path: Path, roots: Sequence[Path], *, create: bool) -> Iterator[int]:
    """Yield a handle on ``path``'s parent, walked from its root without following links."""
    root = _root_of(path, roots)
    parts = path.parent.relative_to(root).parts
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            try:
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise SandboxDenied(
                        f"Access denied: {path} now goes through a symlink or non-directory "
                        f"({part}); nothing was written."
                    ) from None
                raise
            os.close(fd)
            fd = next_fd
        yield fd
    finally:
        os.close(fd)


def _read_fd(fd: int, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    truncated = remaining <= 0 and bool(os.read(fd, 1))
    return b"".join(chunks), truncated


def read_regular_file(path: Path, limit: int) -> tuple[bytes, bool, int]:
    """Read at most ``limit`` bytes of a regular file, not following a final symlink.

    Returns (data, truncated, size).
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist.") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory; use list_dir.") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise SandboxDenied(f"Access denied: {path} is a symlink.") from None
        raise ToolError(f"cannot open {path}: {err.strerror}.") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{path} is a directory; use list_dir.")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{path} is not a regular file (device, FIFO or socket).")
        data, truncated = _read_fd(fd, limit)
        return data, truncated, info.st_size
    finally:
        os.close(fd)


def current_digest(path: Path, roots: Sequence[Path]) -> str | None:
    """sha256 of the file at ``path`` as the no-follow walk sees it; None when absent."""
    try:
        with open_parent(path, roots, create=False) as parent:
            return _digest_at(parent, path.name)
    except FileNotFoundError:
        return None


def _digest_at(parent: int, name: str) -> str | None:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise SandboxDenied(f"Access denied: {name} is a symlink.") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SandboxDenied(f"Access denied: {name} is not a regular file.")
        if info.st_nlink > 1:
            raise SandboxDenied(
                f"Access denied: {name} has {info.st_nlink} hard links; writing it would "
                "change the other names too."
            )
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def atomic_write(
    path: Path, data: bytes, roots: Sequence[Path], *, expected_digest: str | None
) -> None:
    """Replace ``path`` with ``data`` atomically, only if it still has ``expected_digest``.

    ``expected_digest=None`` means the file must not exist yet. A temp file is created in the
    same directory (O_EXCL, no-follow), fsynced, then renamed over the target through the same
    directory handle, so a crash leaves the old file or the new one, never a partial one.
    """
    try:
        with open_parent(path, roots, create=True) as parent:
            if _digest_at(parent, path.name) != expected_digest:
                raise ToolError(
                    f"{path} changed since this change was prepared; nothing was written. "
                    "Read it again and prepare a new change."
                )
            mode = 0o644
            with contextlib.suppress(FileNotFoundError):
                mode = stat.S_IMODE(
                    os.stat(path.name, dir_fd=parent, follow_symlinks=False).st_mode
                )
            tmp = f".{path.name}.rune-{secrets.token_hex(4)}.tmp"
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                mode,
                dir_fd=parent,
            )
            try:
                with os.fdopen(fd, "wb", closefd=True) as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.rename(tmp, path.name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise
            os.fsync(parent)
    except (SandboxDenied, ToolError):
        raise
    except OSError as err:
        raise ToolError(
            f"cannot write {path}: {err.strerror or err}; nothing was written."
        ) from None
