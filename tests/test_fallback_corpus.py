"""The whole reply corpus (tests/corpus/fallback_replies.jsonl) against the parser.

Each entry is a model reply and the calls a human reading it would extract (or none), or
``expect_error`` when the reply tries to call and cannot be used. Origins: ``format`` (each
accepted format), ``hard-case`` (damage, errors, false-positive traps) and
``recorded:<model>`` (real replies of a real local model to Rune's fallback prompt, recorded
with bench/record_fallback_replies.py). The target is 100% and no false positive.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rune.formats.fallback import parse_tool_calls

CORPUS = Path(__file__).parent / "corpus" / "fallback_replies.jsonl"
# The built-in tool names the recorded replies were prompted with, plus edit/list tools.
KNOWN = frozenset(
    {"read_file", "write_file", "edit_file", "list_dir", "run_command", "search", "format_code"}
)


@dataclass(frozen=True)
class Verdict:
    entry: dict[str, Any]
    got: list[dict[str, Any]]
    error: str | None

    @property
    def correct(self) -> bool:
        if self.entry["expect_error"]:
            return self.error is not None and not self.got
        return self.error is None and self.got == self.entry["expected"]

    @property
    def false_positive(self) -> bool:
        """Calls the label does not have: the dangerous direction."""
        expected = self.entry["expected"]
        return bool(self.got) and any(call not in expected for call in self.got)


def load_corpus() -> list[dict[str, Any]]:
    with CORPUS.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def judge(entry: dict[str, Any]) -> Verdict:
    outcome = parse_tool_calls(entry["reply"], KNOWN)
    got = [{"name": c.name, "arguments": c.arguments} for c in outcome.calls]
    return Verdict(entry, got, outcome.error)


def test_corpus_is_large_varied_and_well_formed() -> None:
    entries = load_corpus()
    assert len(entries) >= 150
    assert len({e["id"] for e in entries}) == len(entries), "ids must be unique"
    for entry in entries:
        assert set(entry) >= {"id", "reply", "expected", "expect_error", "origin"}, entry["id"]
        assert isinstance(entry["reply"], str) and isinstance(entry["expect_error"], bool)
        assert all(set(call) == {"name", "arguments"} for call in entry["expected"])
        assert not (entry["expect_error"] and entry["expected"]), entry["id"]
    origins = Counter(e["origin"].split(":")[0] for e in entries)
    assert origins["format"] and origins["hard-case"]
    assert origins["recorded"] >= 20
    recorded_calls = [e for e in entries if e["origin"].startswith("recorded") and e["expected"]]
    assert recorded_calls, "the real model's own call attempts are part of the corpus"


def test_every_reply_parses_as_labelled(capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = [judge(entry) for entry in load_corpus()]
    wrong = [v for v in verdicts if not v.correct]
    false_positives = [v for v in verdicts if v.false_positive]
    by_origin: Counter[str] = Counter()
    right_by_origin: Counter[str] = Counter()
    for verdict in verdicts:
        by_origin[verdict.entry["origin"]] += 1
        right_by_origin[verdict.entry["origin"]] += verdict.correct
    lines = [
        f"fallback corpus: {len(verdicts) - len(wrong)}/{len(verdicts)} correct "
        f"({100 * (len(verdicts) - len(wrong)) / len(verdicts):.1f}%), "
        f"false positives: {len(false_positives)}",
        *(f"  {origin}: {right_by_origin[origin]}/{n}" for origin, n in sorted(by_origin.items())),
    ]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    details = [
        f"{v.entry['id']}: expected {v.entry['expected']} error={v.entry['expect_error']}, "
        f"got {v.got} error={v.error!r}"
        for v in wrong
    ]
    assert not false_positives, details
    assert not wrong, details
