"""File access that strings cannot trick: no-follow opens relative to directory handles.

Paths arrive here validated by ``rune.tools.sandbox``; these functions make sure the file
actually touched is the one that was validated, even if a symlink is swapped in between
(docs/sandbox.md, "Strings are not enough"): every walk starts at a policy root and opens one
component at a time with ``O_NOFOLLOW``. ``atomic_write`` is the only code in Rune that opens
a file in the user's tree for writing, and it validates the path itself, so no caller can skip
the check.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rune.errors import SandboxDenied, ToolError
from rune.tools.sandbox import SandboxPolicy, validate_write_path, within

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_INFIX = ".rune-"


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def temp_name(name: str) -> str:
    """The name of the temp file ``atomic_write`` creates next to ``name``."""
    return f".{name}{TEMP_INFIX}{secrets.token_hex(4)}.tmp"


def _root_of(path: Path, roots: Sequence[Path]) -> Path:
    matches = [r for r in roots if within(path, (r,))]
    if not matches:
        raise SandboxDenied(f"Access denied: {path} is outside {[str(r) for r in roots]}.")
    return max(matches, key=lambda r: len(r.parts))


def _walk_error(err: OSError, path: Path, part: str) -> ToolError:
    if err.errno in (errno.ELOOP, errno.ENOTDIR):
        return SandboxDenied(
            f"Access denied: {path} goes through a symlink or a non-directory ({part}); "
            "Rune does not follow it, so nothing was touched."
        )
    return ToolError(f"cannot open {path}: {err.strerror or err}.")


def _open_subdir(parent: int, name: str, *, create: bool) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=parent)
    # Opened no-follow again: a symlink planted after mkdir failed is refused, not followed.
    return os.open(name, _DIR_FLAGS, dir_fd=parent)


@contextlib.contextmanager
def open_dir(path: Path, roots: Sequence[Path], *, create: bool = False) -> Iterator[int]:
    """Yield a handle on directory ``path``, walked from its root without following links.

    Raises FileNotFoundError when a component is missing (and ``create`` is off), SandboxDenied
    when one is a symlink or not a directory, ToolError for any other failure.
    """
    root = _root_of(path, roots)
    fd = -1
    part = str(root)
    try:
        fd = os.open(root, _DIR_FLAGS)
        for part in path.relative_to(root).parts:
            next_fd = _open_subdir(fd, part, create=create)
            os.close(fd)
            fd = next_fd
    except FileNotFoundError:
        if fd >= 0:
            os.close(fd)
        raise
    except OSError as err:
        if fd >= 0:
            os.close(fd)
        raise _walk_error(err, path, part) from None
    try:
        yield fd
    finally:
        os.close(fd)


def open_parent(
    path: Path, roots: Sequence[Path], *, create: bool
) -> contextlib.AbstractContextManager[int]:
    """A handle on ``path``'s parent directory (see :func:`open_dir`)."""
    if path in roots:
        raise ToolError(f"{path} is a directory; use list_dir.")
    return open_dir(path.parent, roots, create=create)


def _open_regular_at(parent: int, name: str, shown: Path) -> int:
    """Open ``name`` under ``parent`` for reading: a regular file with one link, never a symlink."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        raise
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise SandboxDenied(
                f"Access denied: {shown} is a symlink; Rune does not follow it. "
                "Use the path it points to."
            ) from None
        if err.errno == errno.EISDIR:
            raise ToolError(f"{shown} is a directory; use list_dir.") from None
        raise ToolError(f"cannot open {shown}: {err.strerror or err}.") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown} is a directory; use list_dir.")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(
                f"{shown} is not a regular file (a FIFO, socket or device); "
                "Rune only reads and writes regular files."
            )
        if info.st_nlink > 1:
            raise SandboxDenied(
                f"Access denied: {shown} has {info.st_nlink} hard links; Rune cannot tell "
                "where its other names are, so it neither reads nor writes it."
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True)
class FileData:
    data: bytes
    size: int
    truncated: bool


def _read_fd(fd: int, limit: int) -> FileData:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    truncated = remaining <= 0 and bool(os.read(fd, 1))
    return FileData(b"".join(chunks), os.fstat(fd).st_size, truncated)


def read_at(parent: int, name: str, shown: Path, limit: int) -> FileData:
    """Read at most ``limit`` bytes of regular file ``name`` under directory handle ``parent``."""
    fd = _open_regular_at(parent, name, shown)
    try:
        return _read_fd(fd, limit)
    except OSError as err:
        raise ToolError(f"cannot read {shown}: {err.strerror or err}.") from None
    finally:
        os.close(fd)


def read_regular_file(path: Path, roots: Sequence[Path], limit: int) -> FileData:
    """Read at most ``limit`` bytes of the regular file at validated ``path``."""
    try:
        with open_parent(path, roots, create=False) as parent:
            return read_at(parent, path.name, path, limit)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist.") from None


#: the biggest Python file Rune reads and parses on the host on its own (a test digest, a
#: repository map): a generated module of megabytes costs seconds and gigabytes in ast.parse
MAX_PARSED_BYTES = 512 * 1024


def read_project_source(path: Path, workspace: Path) -> str | None:
    """The text of ``path`` when it is the project's own: its real path in ``workspace``, a
    regular file with one link, at most :data:`MAX_PARSED_BYTES` of UTF-8; else None. For what
    Rune reads unasked on the host: a forged traceback or import may name any file (a link
    out of the workspace, a hard link to a secret, a FIFO, a huge module)."""
    root = Path(os.path.realpath(workspace))
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(root):
        return None
    try:
        found = read_regular_file(real, [root], MAX_PARSED_BYTES)
        return None if found.truncated else found.data.decode("utf-8")
    except (ToolError, OSError, UnicodeDecodeError):
        return None


def read_existing(path: Path, roots: Sequence[Path], limit: int) -> bytes | None:
    """The content of ``path`` (None when it does not exist); refuses files over ``limit``."""
    try:
        with open_parent(path, roots, create=False) as parent:
            found = read_at(parent, path.name, path, limit)
    except FileNotFoundError:
        return None
    if found.truncated:
        raise ToolError(
            f"{path} is {found.size} bytes; Rune edits files up to {limit} bytes. "
            "Change it with run_command instead."
        )
    return found.data


def _digest_at(parent: int, name: str, shown: Path) -> str | None:
    try:
        fd = _open_regular_at(parent, name, shown)
    except FileNotFoundError:
        return None
    try:
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_write(
    path: Path,
    data: bytes,
    policy: SandboxPolicy,
    *,
    workspace: str | os.PathLike[str] | None = None,
    expected_digest: str | None,
) -> Path:
    """Validate ``path``, then replace it with ``data`` if it still has ``expected_digest``.

    ``path`` is the resolved path the change was prepared for; if it now resolves anywhere else
    (a component swapped for a symlink), nothing is written.

    ``expected_digest=None`` means the file must not exist yet. A temp file is created in the
    same directory (O_EXCL, no-follow), fsynced, then renamed over the target through the same
    directory handle, so a crash leaves the old file or the new one, never a partial one.
    Returns the resolved path written.
    """
    target = validate_write_path(path, policy, workspace)
    if target != path:
        raise SandboxDenied(
            f"Access denied: {path} now resolves to {target}; nothing was written. "
            "Prepare the change again."
        )
    try:
        with open_parent(target, policy.write_roots, create=True) as parent:
            if _digest_at(parent, target.name, target) != expected_digest:
                raise ToolError(
                    f"{target} changed since this change was prepared; nothing was written. "
                    "Read it again and prepare a new change."
                )
            mode = 0o644
            with contextlib.suppress(FileNotFoundError):
                existing = os.stat(target.name, dir_fd=parent, follow_symlinks=False)
                mode = stat.S_IMODE(existing.st_mode)
            tmp = temp_name(target.name)
            fd = os.open(tmp, _TEMP_FLAGS, mode, dir_fd=parent)
            try:
                try:
                    _write_all(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.rename(tmp, target.name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise
            os.fsync(parent)
    except OSError as err:
        raise ToolError(
            f"cannot write {target}: {err.strerror or err}; nothing was written."
        ) from None
    return target


def atomic_remove(
    path: Path,
    policy: SandboxPolicy,
    *,
    workspace: str | os.PathLike[str] | None = None,
    expected_digest: str,
) -> Path:
    """Validate ``path``, then remove it if it is still a regular file with ``expected_digest``.

    The counterpart of :func:`atomic_write` for taking back a change that created a file
    (``rune undo``): the same choke point, the same no-follow walk from a policy root, so a
    symlink or a file that changed since is refused and nothing is removed.
    """
    target = validate_write_path(path, policy, workspace)
    if target != path:
        raise SandboxDenied(f"Access denied: {path} now resolves to {target}; nothing was removed.")
    try:
        with open_parent(target, policy.write_roots, create=False) as parent:
            if _digest_at(parent, target.name, target) != expected_digest:
                raise ToolError(f"{target} changed since it was checked; nothing was removed.")
            os.unlink(target.name, dir_fd=parent)
            os.fsync(parent)
    except FileNotFoundError:
        raise ToolError(f"{target} does not exist; nothing was removed.") from None
    except OSError as err:
        raise ToolError(f"cannot remove {target}: {err.strerror or err}.") from None
    return target


@dataclass(frozen=True)
class Entry:
    """One directory entry as ``lstat`` sees it."""

    name: str
    kind: str
    size: int
    target: str | None = None


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "dir"),
        (stat.S_ISREG, "file"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return kind
    return "device"


def list_entries(path: Path, roots: Sequence[Path]) -> list[Entry]:
    """The entries of directory ``path``, sorted by name; symlinks are reported, not followed."""
    try:
        with open_dir(path, roots) as fd, os.scandir(fd) as scan:
            entries = []
            for item in scan:
                info = item.stat(follow_symlinks=False)
                kind = _kind(info.st_mode)
                target = os.readlink(item.name, dir_fd=fd) if kind == "symlink" else None
                entries.append(Entry(item.name, kind, info.st_size, target))
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist.") from None
    except OSError as err:
        raise ToolError(f"cannot list {path}: {err.strerror or err}.") from None
    return sorted(entries, key=lambda e: e.name)


def walk_files(
    top: Path, roots: Sequence[Path], skip_dir: Callable[[Path], bool]
) -> Iterator[tuple[int, Path]]:
    """Yield (parent handle, path) for each regular file below directory ``top``.

    Symlinks are never followed, and directories for which ``skip_dir`` is true are not
    entered. The handle is valid until the generator resumes.
    """
    try:
        with open_dir(top, roots) as fd:
            yield from _walk(fd, top, skip_dir)
    except FileNotFoundError:
        raise ToolError(f"{top} does not exist.") from None


def _walk(fd: int, here: Path, skip_dir: Callable[[Path], bool]) -> Iterator[tuple[int, Path]]:
    try:
        with os.scandir(fd) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        path = here / entry.name
        if entry.is_dir(follow_symlinks=False):
            if skip_dir(path):
                continue
            try:
                sub = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # swapped for a symlink or unreadable: not entered
            try:
                yield from _walk(sub, path, skip_dir)
            finally:
                os.close(sub)
        elif entry.is_file(follow_symlinks=False):
            yield fd, path
