"""Shown the failing test, the model fixes the function it re-sends as it is
(rune.assists.revise): where the tests judge the run, Rune asks for a fix in a plain request
and takes it when the tests pass with it (or fewer fail), before asking again sampled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.test_again import SPACED, run_on_calc
from tests.test_test_driven import BROKEN, FIXED, change, needs_bwrap, turn

from rune.assists.again import SAMPLES
from rune.assists.revise import revise_prompt
from rune.transport.scripted import ScriptedRequest

#: every assist (but the sampled repair: run_on_calc)
NONE: frozenset[str] = frozenset()
#: a wrong version: the tests fail with it as they do with BROKEN
ALSO_WRONG = "def add(a, b):\n    total = a // b\n    return total\n"


def fenced(code: str) -> dict[str, Any]:
    """A plain reply: the definition in a fenced block, as the prompt asks."""
    return {"content": f"Here is the fix:\n\n```python\n{code}```\n"}


def plain(requests: list[ScriptedRequest]) -> list[ScriptedRequest]:
    """The requests without tools and without a grammar: the fixes asked for."""
    return [r for r in requests if r.tools is None and r.response_schema is None]


@needs_bwrap
def test_a_fix_shown_the_failing_test_takes_the_place_of_the_function_sent_as_it_is(
    tmp_path: Path,
) -> None:
    # the model sends add as the file has it, bug included
    resp, ops, transport = run_on_calc(tmp_path, [change(BROKEN), fenced(FIXED)], without=NONE)
    assert resp.success and not resp.incomplete, resp.text
    assert ops.read_text() == FIXED
    assert resp.text.startswith("Fixed: the tests")
    assert any("Rune showed it the failing test" in w and "(it passes the tests)" in w
               for w in resp.warnings)  # fmt: skip
    asked = transport.requests[1]
    # one plain message, at the run's own options: not sampled
    assert plain(transport.requests) == [asked] and len(asked.messages) == 1
    assert "seed" not in (asked.options or {}) and "temperature" not in (asked.options or {})
    prompt = str(asked.messages[0]["content"])
    assert "total = a - b" in prompt  # the code as the file holds it
    assert "self.assertEqual(add(2, 3), 5)" in prompt  # the failing test's own code
    assert "AssertionError" in prompt  # and its error
    changes = [(e.arguments["code"], e.status) for e in resp.events if e.name == "replace_function"]
    assert changes == [(FIXED, "done")]


@needs_bwrap
def test_a_fix_the_tests_fail_is_not_taken_and_the_model_is_asked_again(tmp_path: Path) -> None:
    # the fix fails; the first sample asked again (rune.assists.again) passes
    resp, ops, transport = run_on_calc(
        tmp_path, [change(BROKEN), fenced(ALSO_WRONG), change(FIXED)], without=NONE
    )
    assert resp.success and not resp.incomplete, resp.text
    assert ops.read_text() == FIXED
    assert not any("Rune showed it the failing test" in w for w in resp.warnings)
    assert any("asked again (sampled)" in w for w in resp.warnings)
    assert len(plain(transport.requests)) == 1
    made = [e.arguments["code"] for e in resp.events if e.name == "replace_function"]
    assert made == [FIXED]  # the wrong fix was never written


@needs_bwrap
def test_a_function_is_fixed_so_once_a_run(tmp_path: Path) -> None:
    # add re-sent as it is twice; the samples asked again change nothing either time
    samples = [change(SPACED)] * SAMPLES
    script = [change(BROKEN), fenced(ALSO_WRONG), *samples, change(BROKEN), *samples]
    script.append(turn(answer="add is fine."))
    resp, ops, transport = run_on_calc(tmp_path, script, without=NONE)
    assert ops.read_text() == BROKEN
    # both re-sends were reached (each asked again), and only the first asked for a fix
    assert sum(f"none of {SAMPLES} replies" in w for w in resp.warnings) == 2
    assert len(plain(transport.requests)) == 1


def test_the_prompt_shows_the_code_then_the_failure_and_asks_for_one_block() -> None:
    prompt = revise_prompt("calc/ops.py", "add", BROKEN, "FAILED test_add\n  AssertionError")
    assert prompt.index("total = a - b") < prompt.index("FAILED test_add")
    assert prompt.endswith("Reply with the whole definition of `add` in one ```python block.")
    # code with a fence of its own is shown inside a longer one
    assert "````python" in revise_prompt("a.py", "f", 'def f():\n    return "```"\n', "FAILED")
