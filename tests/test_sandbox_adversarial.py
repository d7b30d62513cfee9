"""Attacks from the bug classes docs/sandbox.md guards against, each tried through the real tools.

Every case must end denied (a ToolError, usually SandboxDenied) with no byte written outside
the workspace; the outside directory is compared byte for byte after each attempt. The totals
are printed by the last test (run with -s to see them).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rune.errors import SandboxDenied, ToolError, ToolInputError
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.files import MIN_READ_LINES

TALLY: Counter[str] = Counter()
SECRET = b"do not touch\n"


class Arena:
    """A workspace (the only root) next to an outside directory holding a secret."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.ws = base / "ws"
        self.outside = base / "outside"
        self.ws.mkdir()
        self.outside.mkdir()
        (self.outside / "secret.txt").write_bytes(SECRET)
        self.executor = ToolExecutor(SandboxPolicy.workspace_only(self.ws), self.ws)

    def snapshot(self) -> dict[str, bytes | str]:
        state: dict[str, bytes | str] = {}
        for dirpath, dirnames, filenames in os.walk(self.outside):
            for name in dirnames + filenames:
                path = Path(dirpath, name)
                rel = str(path.relative_to(self.outside))
                state[rel] = path.read_bytes() if path.is_file() else "dir"
        return state

    def write(self, path: str, content: str = "pwned\n") -> str:
        change = self.executor.prepare("write_file", {"path": path, "content": content})
        return self.executor.apply(change)

    def denied(self, case: str, attempt: Callable[[], Any], kind: type = ToolError) -> str:
        """Run ``attempt``; it must raise ``kind`` and leave the outside untouched."""
        before = self.snapshot()
        TALLY["tried"] += 1
        with pytest.raises(kind) as caught:
            attempt()
        assert self.snapshot() == before, f"{case}: something was written outside"
        TALLY["denied"] += 1
        TALLY[f"class:{case}"] += 1
        return str(caught.value)


@pytest.fixture
def arena(tmp_path: Path) -> Arena:
    return Arena(tmp_path)


def test_sibling_prefix_directory(arena: Arena) -> None:
    evil = arena.base / "ws_evil"
    evil.mkdir()
    for path in (str(evil / "x"), "../ws_evil/x", str(arena.ws) + "_evil/x"):
        arena.denied("sibling-prefix", lambda p=path: arena.write(p), SandboxDenied)
        arena.denied("sibling-prefix", lambda p=path: arena.executor.run("read_file", {"path": p}))
    assert list(evil.iterdir()) == []


@pytest.mark.parametrize(
    "form",
    [
        "../outside/secret.txt",
        "a/../../outside/secret.txt",
        "missing/../../outside/new.txt",
        "./../outside/new.txt",
        "{outside}/new.txt",
        "/{outside}/new.txt",
        "//{outside}//new.txt",
        "{ws}/..//outside/new.txt",
        "{ws}/../outside/../outside/new.txt",
    ],
)
def test_dotdot_and_slash_forms(arena: Arena, form: str) -> None:
    (arena.ws / "a").mkdir()
    path = form.format(outside=str(arena.outside).lstrip("/"), ws=arena.ws)
    if form.startswith("{outside}"):
        path = "/" + path
    arena.denied("dotdot-slash", lambda: arena.write(path), SandboxDenied)
    assert not (arena.outside / "new.txt").exists()


def test_tilde_forms(arena: Arena, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(arena.outside))
    for path in ("~/new.txt", "~", "~/../outside/secret.txt"):
        arena.denied("tilde", lambda p=path: arena.write(p), SandboxDenied)
    # "~user/x" is not expanded: it names a directory "~user" inside the workspace.
    arena.write("~nobody/x.txt")
    assert (arena.ws / "~nobody" / "x.txt").read_text() == "pwned\n"


def test_symlink_escapes(arena: Arena) -> None:
    (arena.ws / "dir_link").symlink_to(arena.outside)
    (arena.ws / "file_link").symlink_to(arena.outside / "secret.txt")
    (arena.ws / "rel_link").symlink_to("../outside")
    (arena.ws / "chain").symlink_to("dir_link")
    for path in ("dir_link/new.txt", "file_link", "rel_link/secret.txt", "chain/new.txt"):
        arena.denied("symlink", lambda p=path: arena.write(p), SandboxDenied)
        arena.denied("symlink", lambda p=path: arena.executor.run("read_file", {"path": p}))
    edit = {"path": "file_link", "old_text": "do", "new_text": "did"}
    arena.denied("symlink", lambda: arena.executor.prepare("edit_file", edit), SandboxDenied)
    listing = arena.executor.run("list_dir", {"path": "."})
    assert "[symlink, not followed]" in listing
    hits = arena.executor.run("search", {"pattern": "do not touch"})
    assert hits.startswith("no matches"), "search followed a symlink out of the workspace"


def test_hardlink_escape(arena: Arena) -> None:
    os.link(arena.outside / "secret.txt", arena.ws / "hard.txt")
    arena.denied("hardlink", lambda: arena.write("hard.txt"), SandboxDenied)
    edit = {"path": "hard.txt", "old_text": "do", "new_text": "did"}
    arena.denied("hardlink", lambda: arena.executor.prepare("edit_file", edit), SandboxDenied)
    read = {"path": "hard.txt"}
    arena.denied("hardlink", lambda: arena.executor.run("read_file", read), SandboxDenied)
    hits = arena.executor.run("search", {"pattern": "touch"})
    assert "do not touch" not in hits


def test_dangling_symlink(arena: Arena) -> None:
    (arena.ws / "dangling").symlink_to(arena.outside / "created.txt")
    (arena.ws / "dangling_dir").symlink_to(arena.outside / "newdir")
    (arena.ws / "dangling_in").symlink_to(arena.ws / "not-yet")
    for path in ("dangling", "dangling_dir/x.txt", "dangling_in"):
        arena.denied("dangling-symlink", lambda p=path: arena.write(p), SandboxDenied)
    assert not (arena.ws / "not-yet").exists()


def test_proc_magic_links(arena: Arena, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(arena.ws)
    for path in (
        f"/proc/self/root{arena.outside}/new.txt",
        f"/proc/self/root{arena.ws}/inside.txt",
        "/proc/self/cwd/x.txt",
        f"/proc/{os.getpid()}/root{arena.outside}/secret.txt",
    ):
        arena.denied("proc-self-root", lambda p=path: arena.write(p), SandboxDenied)
        arena.denied("proc-self-root", lambda p=path: arena.executor.run("read_file", {"path": p}))
    assert not (arena.ws / "inside.txt").exists()


def _finishes(action: Callable[[], Any], seconds: float = 5.0) -> BaseException | None:
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            action()
            outcome.append(None)
        except BaseException as err:
            outcome.append(err)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, "the tool hung"
    return outcome[0]


def test_fifos_do_not_hang(arena: Arena) -> None:
    os.mkfifo(arena.ws / "pipe")
    (arena.ws / "text.txt").write_text("needle\n")
    read = {"path": "pipe"}
    arena.denied("fifo", lambda: _raise(_finishes(lambda: arena.executor.run("read_file", read))))
    arena.denied("fifo", lambda: _raise(_finishes(lambda: arena.write("pipe"))))
    outcome: list[str] = []
    search = {"pattern": "needle"}
    assert _finishes(lambda: outcome.append(arena.executor.run("search", search))) is None
    assert outcome == ["text.txt:1: needle"]


def _raise(err: BaseException | None) -> None:
    assert err is not None, "expected the tool to refuse"
    raise err


def test_huge_files_are_capped_or_refused(arena: Arena) -> None:
    huge = arena.ws / "huge.log"
    with huge.open("wb") as handle:
        handle.write(b"line\n" * 4000)
        handle.truncate(300 * 1024 * 1024)  # sparse: cheap on disk
    shown = arena.executor.run("read_file", {"path": "huge.log", "limit": 3})
    assert "only the first" in shown and f"showing lines 1-{MIN_READ_LINES} " in shown
    edit = {"path": "huge.log", "old_text": "line", "new_text": "LINE"}
    arena.denied("huge-file", lambda: arena.executor.prepare("edit_file", edit))
    # search (ripgrep) has no size cap, only its time budget: this file is binary (NULs from
    # 20 kB on), so it is skipped at once.
    found = arena.executor.run("search", {"pattern": "line"})
    assert found.startswith("no matches")


@pytest.mark.parametrize(
    "name", [".BashRC", ".Git/HOOKS/pre-commit", "x/.GIT/config", "EVIL.Pth", ".VSCode/tasks.json"]
)
def test_protected_names_in_any_case(arena: Arena, name: str) -> None:
    arena.denied("protected-case", lambda: arena.write(name), SandboxDenied)
    assert not (arena.ws / name).exists()


@pytest.mark.parametrize(
    ("name", "refusal"),
    [
        *[
            (name, SandboxDenied)
            for name in ["a\x00b", "a\x1b]0;x\x07", "evil\u202etxt.py", "a\u200bb", "a\u2066b"]
        ],
        ("a\rb", SandboxDenied),
        # not even valid Unicode: refused with the arguments, before the sandbox sees it
        ("\ud800", ToolInputError),
    ],
)
def test_hidden_characters(arena: Arena, name: str, refusal: type[ToolError]) -> None:
    arena.denied("hidden-chars", lambda: arena.write(name), refusal)
    arena.denied("hidden-chars", lambda: arena.executor.run("read_file", {"path": name}))
    assert os.listdir(arena.ws) == []


def test_approve_then_swap_parent_for_symlink(arena: Arena) -> None:
    for _ in range(100):
        sub = arena.ws / "sub"
        sub.mkdir()
        change = arena.executor.prepare("write_file", {"path": "sub/f.txt", "content": "x"})
        shutil.rmtree(sub)
        sub.symlink_to(arena.outside)
        arena.denied("approve-then-swap", lambda c=change: arena.executor.apply(c), SandboxDenied)
        sub.unlink()


def test_approve_then_swap_file_for_symlink_or_new_content(arena: Arena) -> None:
    target = arena.ws / "f.txt"
    target.write_text("old\n")
    change = arena.executor.prepare("write_file", {"path": "f.txt", "content": "new\n"})
    target.unlink()
    target.symlink_to(arena.outside / "secret.txt")
    arena.denied("approve-then-swap", lambda: arena.executor.apply(change), SandboxDenied)
    target.unlink()
    target.write_text("old\n")
    change = arena.executor.prepare(
        "edit_file", {"path": "f.txt", "old_text": "old", "new_text": "x"}
    )
    target.write_text("old, then changed by someone else\n")
    message = arena.denied("approve-then-swap", lambda: arena.executor.apply(change))
    assert "changed since this change was prepared" in message
    assert target.read_text() == "old, then changed by someone else\n"


def test_racing_swapper_never_gets_a_byte_outside(arena: Arena) -> None:
    """A thread flips ws/sub between a real directory and a symlink while changes apply."""
    sub, real = arena.ws / "sub", arena.ws / "real"
    real.mkdir()
    sub.symlink_to(real)  # prepared while sub points inside; still a symlink -> resolves to real
    stop = threading.Event()

    def swapper() -> None:
        while not stop.is_set():
            tmp = arena.ws / "sub.tmp"
            tmp.symlink_to(arena.outside)
            os.replace(tmp, sub)
            tmp.symlink_to(real)
            os.replace(tmp, sub)

    outcomes: Counter[str] = Counter()
    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        for i in range(200):
            TALLY["tried"] += 1
            try:
                change = arena.executor.prepare(
                    "write_file", {"path": f"sub/f{i}.txt", "content": "x"}
                )
                arena.executor.apply(change)
                outcomes["written inside"] += 1
            except SandboxDenied:
                outcomes["denied"] += 1
                TALLY["denied"] += 1
            TALLY["class:racing-swap"] += 1
            assert arena.snapshot() == {"secret.txt": SECRET}
    finally:
        stop.set()
        thread.join()
    TALLY["racing writes that landed inside"] += outcomes["written inside"]
    assert sum(outcomes.values()) == 200
    assert len(list(real.iterdir())) == outcomes["written inside"]


def test_symlink_created_by_a_command_is_not_followed(arena: Arena) -> None:
    """CVE-2026-39861: a command plants a link; the file tools later refuse to follow it."""
    command = {"command": f"ln -s {arena.outside} planted", "timeout": 10}
    arena.executor.apply(arena.executor.prepare("run_command", command))
    assert (arena.ws / "planted").is_symlink()
    arena.denied("command-planted-link", lambda: arena.write("planted/new.txt"), SandboxDenied)


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    """Totals for the closing note, printed once the module's cases have run (`-s` shows it)."""
    yield
    classes = {k[6:]: v for k, v in TALLY.items() if k.startswith("class:")}
    print(f"\nadversarial cases tried: {TALLY['tried']}, denied: {TALLY['denied']}")
    landed = TALLY["racing writes that landed inside"]
    print(f"racing applies that landed inside the workspace: {landed}")
    for name, count in sorted(classes.items()):
        print(f"  {name}: {count}")
