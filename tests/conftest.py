"""Suite-wide isolation: no test touches the real user's data, config or model server."""

from __future__ import annotations

import functools
import os
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
    # `rune demo` makes its project in the cache: a test's never lands in the real HOME's.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("rune-cache")))
    # A developer's pyenv Python (which a shim on PATH stands for) may have pytest and a
    # site-packages full of plugins to scan at each of the suite's hundreds of contained test
    # runs (1 s each, against 0.2 s): the suite's checks take the next python3 on PATH, as on
    # a machine without pyenv. The shim rule has its own tests (tests/test_interpreter.py).
    monkeypatch.setenv("PYENV_VERSION", "system")
    yield


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A HOME for a ``rune`` subprocess (tests/fakes/cli.py); a module may define its own."""
    path = tmp_path / "home"
    path.mkdir()
    return path


def pytest_report_header() -> list[str]:
    return [
        f"rune tests: repo at {Path(__file__).resolve().parent.parent.name}",
        f"containment: {_containment()[0]}",
    ]


@functools.cache
def _containment() -> tuple[str, bool, bool]:
    """(what the tests marked ``bwrap``/``seccomp`` get here, bwrap works, seccomp works)."""
    from rune.tools.commands import containment_report, find_bwrap, seccomp_works

    works, how = containment_report()
    bwrap = find_bwrap()
    seccomp = works and bwrap is not None and seccomp_works(bwrap)
    return (how if works else f"NOT ACTIVE ({how})"), works, seccomp


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``scripts/test``) the tests marked ``live`` run in one worker: they
    share the session's model server and the pulled model's directory (``--dist loadgroup``)."""
    for item in items:
        if item.get_closest_marker("live") is not None:
            item.add_marker(pytest.mark.xdist_group("live"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``bwrap`` or ``seccomp`` skips where that containment does not work, and
    fails under ``CI=true``: CI must test the sandbox, not skip it silently."""
    how, works, seccomp = _containment()
    missing = (item.get_closest_marker("bwrap") is not None and not works) or (
        item.get_closest_marker("seccomp") is not None and not seccomp
    )
    if not missing:
        return
    reason = f"containment: {how}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; under CI=true the sandbox tests must run", pytrace=False)
    pytest.skip(reason)
