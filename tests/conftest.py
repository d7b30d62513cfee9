"""Suite-wide isolation: no test touches the real user's data, config or model server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# One real model server per test session for every test marked `live`.
from live.server import live_server  # noqa: F401


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    data = tmp_path_factory.mktemp("rune-data")
    config = tmp_path_factory.mktemp("rune-config")
    monkeypatch.setenv("RUNE_DATA_DIR", str(data))
    monkeypatch.setenv("XDG_DATA_HOME", str(data / "xdg"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    yield


def pytest_report_header() -> list[str]:
    return [f"rune tests: repo at {Path(__file__).resolve().parent.parent.name}"]
