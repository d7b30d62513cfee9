"""Text shown to the operator for approval: nothing in it may hide or rewrite what it says.

Hidden characters are escaped by :mod:`rune.text` (re-exported here). The diff before an
approval shows every byte that will be written: content that is not UTF-8 shows its bytes as
``\\xNN``, and a binary file being replaced is named as such, with all of its new content.

The diff is fast on any input: common head and tail are cut off first, then what is left is
aligned on lines that occur once on each side (patience diff, O(n log n)); only small gaps
between those anchors go to :mod:`difflib`, whose matcher is quadratic on large inputs (a 4 MB
rewrite would take hours). A total work budget keeps the worst case linear: past it, a gap is
shown as replaced whole, which is still exact, only less tight.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from rune.text import escape_hidden, for_display, hidden_note, visible

__all__ = [
    "escape_hidden",
    "for_display",
    "hidden_note",
    "is_binary",
    "line_opcodes",
    "unified_diff",
    "visible",
]

CONTEXT_LINES = 3
#: gaps up to this many (old lines x new lines) are aligned by difflib
SMALL_GAP = 40_000
#: lines the aligner may look at, as a multiple of the input's lines, before it gives up
WORK_FACTOR = 16

#: what difflib.SequenceMatcher.get_opcodes() yields: (tag, i1, i2, j1, j2)
Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


def is_binary(data: bytes | None) -> bool:
    """Whether file content looks binary (a NUL byte early on), as git and grep decide."""
    return data is not None and b"\0" in data[:8192]


def _lines(text: str) -> list[str]:
    # Only "\n" ends a line here: str.splitlines also splits on \r, \x0b, \x1c, U+2028..., which
    # would let those characters pass as line ends instead of being escaped.
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


# --- alignment ---------------------------------------------------------------------------------


def _unique_anchors(
    a: Sequence[str], alo: int, ahi: int, b: Sequence[str], blo: int, bhi: int
) -> list[tuple[int, int]]:
    """Lines that occur exactly once in ``a[alo:ahi]`` and once in ``b[blo:bhi]``, paired, in
    the longest run that is increasing on both sides (patience sorting)."""
    seen_a: dict[str, int] = {}
    for i in range(alo, ahi):
        seen_a[a[i]] = -1 if a[i] in seen_a else i
    seen_b: dict[str, int] = {}
    for j in range(blo, bhi):
        if seen_a.get(b[j], -1) >= 0:
            seen_b[b[j]] = -1 if b[j] in seen_b else j
    pairs = sorted((seen_a[line], j) for line, j in seen_b.items() if j >= 0)
    # Longest increasing subsequence of the b indices, in O(k log k).
    tails: list[int] = []
    tail_at: list[int] = []
    back: list[int] = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        at = bisect.bisect_left(tails, j)
        if at == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[at] = j
            tail_at[at] = k
        back[k] = tail_at[at - 1] if at else -1
    chain: list[tuple[int, int]] = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        chain.append(pairs[k])
        k = back[k]
    chain.reverse()
    return chain


def _matching_blocks(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, int]]:
    """Runs of equal lines ``(i, j, n)``, increasing on both sides."""
    blocks: list[tuple[int, int, int]] = []
    budget = WORK_FACTOR * (len(a) + len(b) + 1)
    regions = [(0, len(a), 0, len(b))]
    while regions:
        alo, ahi, blo, bhi = regions.pop()
        i0, j0 = alo, blo
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            alo, blo = alo + 1, blo + 1
        if alo > i0:
            blocks.append((i0, j0, alo - i0))
        end = ahi
        while ahi > alo and bhi > blo and a[ahi - 1] == b[bhi - 1]:
            ahi, bhi = ahi - 1, bhi - 1
        if end > ahi:
            blocks.append((ahi, bhi, end - ahi))
        if alo == ahi or blo == bhi:
            continue
        if (ahi - alo) * (bhi - blo) <= SMALL_GAP:
            matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
            blocks += [(alo + i, blo + j, n) for i, j, n in matcher.get_matching_blocks() if n]
            continue
        budget -= (ahi - alo) + (bhi - blo)
        anchors = _unique_anchors(a, alo, ahi, b, blo, bhi) if budget > 0 else []
        # No anchor (or no budget left): the gap is shown replaced whole.
        prev_i, prev_j = alo, blo
        for i, j in anchors:
            blocks.append((i, j, 1))
            regions.append((prev_i, i, prev_j, j))
            prev_i, prev_j = i + 1, j + 1
        if anchors:
            regions.append((prev_i, ahi, prev_j, bhi))
    blocks.sort()
    merged: list[tuple[int, int, int]] = []
    for i, j, n in blocks:
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + n)
        else:
            merged.append((i, j, n))
    return merged


def line_opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """How to turn ``a`` into ``b``, as :meth:`difflib.SequenceMatcher.get_opcodes` says it
    (and exactly what it says, when the inputs are small)."""
    if len(a) * len(b) <= SMALL_GAP:
        return difflib.SequenceMatcher(None, a, b).get_opcodes()
    codes: list[Opcode] = []
    i = j = 0
    for ai, bj, n in [*_matching_blocks(a, b), (len(a), len(b), 0)]:
        if i < ai and j < bj:
            codes.append(("replace", i, ai, j, bj))
        elif i < ai:
            codes.append(("delete", i, ai, j, bj))
        elif j < bj:
            codes.append(("insert", i, ai, j, bj))
        i, j = ai + n, bj + n
        if n:
            codes.append(("equal", ai, i, bj, j))
    return codes


def _grouped(codes: list[Opcode], context: int) -> Iterator[list[Opcode]]:
    """Hunks: the changes with ``context`` equal lines around each, as ``diff -u`` groups them."""
    if not codes:
        return
    if codes[0][0] == "equal":
        _, i1, i2, j1, j2 = codes[0]
        codes[0] = ("equal", max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    if codes[-1][0] == "equal":
        _, i1, i2, j1, j2 = codes[-1]
        codes[-1] = ("equal", i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def _range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _hunks(a: list[str], b: list[str], fromfile: str, tofile: str) -> list[str]:
    out: list[str] = []
    for group in _grouped(line_opcodes(a, b), CONTEXT_LINES):
        if not out:
            out += [f"--- {fromfile}\n", f"+++ {tofile}\n"]
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + line for line in a[i1:i2]]
                continue
            out += ["-" + line for line in a[i1:i2]]
            out += ["+" + line for line in b[j1:j2]]
    return out


def relative_label(path: Path, root: Path | None) -> str:
    """``path`` as a person reads it: relative to ``root`` (the workspace) when inside it, else
    absolute, so that a change outside the workspace never looks like one inside."""
    if root is not None:
        try:
            return path.relative_to(root).as_posix() or "."
        except ValueError:
            pass
    return str(path)


def unified_diff(path: Path, before: bytes | None, after: bytes, root: Path | None = None) -> str:
    """The change from ``before`` (None: the file is new) to ``after``, safe to display: every
    character that will be written is shown (escaped when it would not show itself). The
    headers name the file relative to ``root`` (``a/shop/pricing.py``) when it lies inside."""
    note = ""
    if is_binary(before):
        assert before is not None
        note = f"binary file {visible(str(path))} ({len(before)} bytes) is replaced by:\n"
        before = None
    old_lines = [] if before is None else _lines(before.decode("utf-8", "backslashreplace"))
    new_lines = _lines(after.decode("utf-8", "backslashreplace"))
    label = relative_label(path, root)
    inside = label != str(path)
    name = f"/{label}" if inside else label
    fromfile = "/dev/null" if before is None else f"a{name}"
    diff = _hunks(old_lines, new_lines, fromfile, f"b{name}")
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff
    )
    return note + for_display(text or f"(no change to {path})\n")
