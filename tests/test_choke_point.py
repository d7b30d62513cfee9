"""The write choke point: no code path but fs.atomic_write opens a user file for writing.

Two proofs: a static scan of the whole ``rune`` package (and a check that the scanner catches
each form it claims to), and a runtime audit hook that watches every open-for-write, rename,
mkdir and unlink the process makes while all the tools do their work.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rune.app import canary
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.write_sites import scan_source, unreviewed_write_sites

PLANTED = textwrap.dedent(
    """
    import os, shutil, tempfile
    from pathlib import Path
    FLAGS = os.O_WRONLY | os.O_CREAT

    def a(p): open(p, "w")
    def b(p): open(p, mode="ab")
    def c(p, m): open(p, m)
    def d(p): Path(p).write_text("x")
    def e(p): Path(p).write_bytes(b"x")
    def f(p): os.open(p, FLAGS)
    def g(p): os.open(p, os.O_RDWR)
    def h(p, q): os.rename(p, q)
    def i(p, q): os.replace(p, q)
    def j(p, q): shutil.copy(p, q)
    def k(p, q): shutil.move(p, q)
    def l(p): Path(p).open("w")
    def m(): tempfile.mkstemp()
    def n(p): os.fdopen(os.open(p, os.O_RDONLY), "w")
    class C:
        def o(self, p): Path(p).touch()

    def fine(p):
        open(p)
        open(p, "rb")
        os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
        "text".replace("a", "b")
        Path(p).read_text()
    """
)


def test_the_scanner_catches_every_write_form() -> None:
    sites = scan_source(PLANTED, "planted")
    assert sorted({s.function for s in sites}) == sorted([*"abcdefghijklmn", "C.o"])
    assert not [s for s in sites if s.function == "fine"]


def test_no_unreviewed_write_site_in_the_package() -> None:
    assert unreviewed_write_sites() == []


def test_the_canarys_sandbox_checks_hold_and_are_fast(tmp_path: Path) -> None:
    import time

    started = time.monotonic()
    assert canary.check_denial_text(tmp_path) is None
    assert canary.check_choke_point(tmp_path) is None
    assert time.monotonic() - started < 3  # < 1 s alone; the machine is shared in CI


_WATCHING: list[tuple[str, tuple[Any, ...]]] | None = None
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _WATCHING is None:
        return
    if event == "open":
        path, mode, flags = args
        if isinstance(path, int) and stat.S_ISFIFO(os.fstat(path).st_mode):
            return  # subprocess wrapping its own pipe (ruff's stdin), not a file in the tree
        if path == os.devnull:
            return  # subprocess.DEVNULL for a command's stdin
        if (isinstance(mode, str) and set(mode) & set("wax+")) or (flags or 0) & _WRITE_FLAGS:
            _WATCHING.append(("open", args))
    elif event in ("os.rename", "os.remove", "os.mkdir", "os.symlink", "os.link", "os.truncate",
                   "shutil.copyfile", "shutil.move", "os.rmdir"):  # fmt: skip
        _WATCHING.append((event, args))


sys.addaudithook(_hook)


@pytest.fixture
def watched() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    global _WATCHING
    _WATCHING = []
    try:
        yield _WATCHING
    finally:
        _WATCHING = None


def test_at_runtime_only_atomic_write_writes(
    tmp_path: Path, watched: list[tuple[str, tuple[Any, ...]]]
) -> None:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "m.py").write_text("x=1\n")
    del watched[:]
    ex = ToolExecutor(SandboxPolicy.workspace_only(ws), ws, contain_commands=False)
    ex.run("read_file", {"path": "pkg/m.py"})
    ex.run("list_dir", {"path": "pkg"})
    ex.run("search", {"pattern": "x"})
    for name, args in (
        ("write_file", {"path": "new/dir/a.txt", "content": "a\n"}),
        ("edit_file", {"path": "new/dir/a.txt", "old_text": "a", "new_text": "b"}),
        ("format_code", {"path": "pkg/m.py"}),
        ("run_command", {"command": "true"}),
    ):
        ex.apply(ex.prepare(name, args))
    temp = re.compile(r"^\.(a\.txt|m\.py)\.rune-[0-9a-f]{8}\.tmp$")
    kinds: set[str] = set()
    for event, args in watched:
        if event == "open":
            assert temp.match(os.fsdecode(args[0])), f"unexpected open for writing: {args}"
            kinds.add("temp file")
        elif event == "os.rename":
            src, _dst, src_fd, dst_fd = args
            assert temp.match(os.fsdecode(src)) and src_fd == dst_fd is not None
            kinds.add("rename")
        elif event == "os.mkdir":
            assert os.fsdecode(args[0]) in ("new", "dir") and args[2] is not None
            kinds.add("mkdir")
        else:
            raise AssertionError(f"unexpected {event}: {args}")
    assert kinds == {"temp file", "rename", "mkdir"}
    assert (ws / "new/dir/a.txt").read_text() == "b\n"
    assert (ws / "pkg/m.py").read_text() == "x = 1\n"
