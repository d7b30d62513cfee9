"""Property tests: over generated paths and layouts, an allowed write stays inside the root."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rune.errors import SandboxDenied, ToolError
from rune.tools import fs
from rune.tools.executor import SandboxPolicy, validate_read_path, validate_write_path
from rune.tools.sandbox import PROTECTED_FILE_NAMES

COMPONENTS = st.sampled_from(
    ["a", "b", "..", ".", "", "out", "in_link", "out_link", "loop", "file.txt", "ws", "ws_x"]
)
PATHS = st.lists(COMPONENTS, min_size=1, max_size=7).map("/".join)
SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _arena(base: Path) -> tuple[Path, Path]:
    """base/ws (the root) with links in and out, and base/out beside it."""
    ws, out = base / "ws", base / "out"
    (ws / "a" / "b").mkdir(parents=True)
    (out / "a").mkdir(parents=True)
    (ws / "file.txt").write_text("x")
    (ws / "in_link").symlink_to(ws / "a")
    (ws / "out_link").symlink_to(out)
    (ws / "a" / "out_link").symlink_to("../../out")
    (ws / "loop").symlink_to("loop")
    (base / "ws_x").mkdir()
    return ws, out


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


@SETTINGS
@given(relative=PATHS, absolute=st.booleans())
def test_allowed_paths_resolve_inside_the_root(relative: str, absolute: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws, _ = _arena(Path(tmp).resolve())
        raw = str(ws.parent) + "/" + relative if absolute else relative
        policy = SandboxPolicy.workspace_only(ws)
        for validate in (validate_write_path, validate_read_path):
            try:
                resolved = validate(raw, policy, ws)
            except SandboxDenied:
                continue
            assert _inside(resolved, ws)
            # What is returned is already canonical: nothing left to follow.
            existing = resolved
            while not os.path.lexists(existing):
                existing = existing.parent
            assert os.path.realpath(existing) == str(existing)


LAYOUT = st.lists(
    st.tuples(
        st.sampled_from(["d1", "d1/d2", "d3", "d1/d2/d4"]),
        st.sampled_from(["l1", "l2", "l3"]),
        st.sampled_from(["ws", "out", "ws/d1", "out/x", "ws/missing", "../.."]),
    ),
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(layout=LAYOUT, target=PATHS)
def test_generated_symlink_layouts_never_let_a_write_out(
    layout: list[tuple[str, str, str]], target: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp).resolve()
        ws, out = base / "ws", base / "out"
        for d in ("d1/d2/d4", "d3"):
            (ws / d).mkdir(parents=True, exist_ok=True)
        out.mkdir()
        for where, name, points_to in layout:
            link = ws / where / name
            if not os.path.lexists(link):
                link.symlink_to(base / points_to if points_to != "../.." else points_to)
        policy = SandboxPolicy.workspace_only(ws)
        try:
            path = validate_write_path(target + "/new.txt", policy, ws)
            fs.atomic_write(path, b"data", policy, workspace=ws, expected_digest=None)
        except ToolError:
            pass
        else:
            assert path.read_bytes() == b"data" and _inside(path, ws)
        assert list(out.iterdir()) == []


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(sorted(PROTECTED_FILE_NAMES)),
    flips=st.lists(st.booleans(), min_size=30, max_size=30),
    depth=st.lists(st.sampled_from(["src", "x y", "déjà"]), max_size=3),
)
def test_protected_names_are_refused_in_any_case_at_any_depth(
    name: str, flips: list[bool], depth: list[str]
) -> None:
    cased = "".join(c.upper() if f else c for c, f in zip(name, flips, strict=False))
    with tempfile.TemporaryDirectory() as tmp:
        policy = SandboxPolicy.workspace_only(tmp)
        try:
            validate_write_path("/".join([*depth, cased]), policy, tmp)
        except SandboxDenied as err:
            assert "is protected" in str(err) or "holds credentials" in str(err)
        else:
            raise AssertionError(f"{cased} was allowed")
