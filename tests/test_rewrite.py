"""Write it afresh from its docstring (rune.assists.rewrite): a function the model re-sends as
the file holds it is asked for once more, from its signature and docstring alone (the body, and
the bug in it, left out); the rewrite takes the reply's place when it changes the function and,
where Rune runs the project's tests, passes them. The old code is refused afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.test_test_driven import TEST_CALC, approve_all, change, executor, needs_bwrap, turn

from rune.assists import standard_assists
from rune.assists.afresh import AFRESH_TRIES
from rune.assists.repair import SAMPLES, SAMPLES_AFTER_REWRITES
from rune.assists.rewrite import MAX_CONTRACT_CHARS, contract_for
from rune.errors import OtherDefinition, ServerError
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.python_code import (
    code_of,
    contract_of,
    is_stub,
    local_contract_of,
    replace_definition,
)
from rune.tools.testing import auto_check
from rune.transport.scripted import ScriptedTransport

DOC = '    """The sum of ``a`` and ``b``."""\n'
BROKEN = "def add(a, b):\n" + DOC + "    return a - b\n"
FIXED = "def add(a, b):\n" + DOC + "    return a + b\n"
WRONG = "def add(a, b):\n" + DOC + "    return a * b\n"
SOURCE = BROKEN + "\n\ndef mul(a, b):\n    return a * b\n"
TASK = "add in calc.py does not do what its docstring says. Find the bug and fix it."


def written(code: str) -> dict[str, Any]:
    """The model's plain reply to the rewrite request: prose, then the function in a block."""
    return {"content": f"Here is `add` as its docstring says:\n\n```python\n{code}```\n"}


def rewrite_requests(transport: ScriptedTransport) -> list[int]:
    """The requests that asked for a rewrite: one plain user message, no tools, no grammar."""
    return [
        i
        for i, r in enumerate(transport.requests)
        if len(r.messages) == 1 and r.response_schema is None and not r.tools
    ]


def run(ws: Path, script: list[dict[str, Any]], *, tests: bool = False) -> tuple[Any, Any]:
    tools = executor(ws)
    # The model's own check is left out: these tests are about the rewrite, not the checks, nor
    # the fix asked for after it (rune.assists.revise, tests/test_revise.py).
    assists = standard_assists(
        auto_checks=(lambda r: auto_check(r, tools.workspace, tools.policy)) if tests else None,
        without=frozenset({"check", "repair", "again", "revise"}),
    )
    transport = ScriptedTransport(script)
    loop = LocalToolRuntime(transport, tools, model="m", protocol="constrained", assists=assists)
    task = TEST_TASK if tests else TASK
    return approve_all(loop, loop.run([{"role": "user", "content": task}])), transport


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "calc.py").write_text(SOURCE)
    return path


# --- the contract: the file with one body left out --------------------------------------------


def test_the_contract_keeps_the_signature_and_docstring_and_leaves_the_body_out() -> None:
    contract = contract_of(SOURCE, "add")
    assert contract == "def add(a, b):\n" + DOC + "    ...\n\n\ndef mul(a, b):\n    return a * b\n"
    method = "class Calc:\n    def add(self, a, b):\n    " + DOC + "        return a - b\n"
    assert contract_of(method, "Calc.add") == (
        "class Calc:\n    def add(self, a, b):\n    " + DOC + "        ...\n"
    )
    assert contract_of(method, "add") == contract_of(method, "Calc.add")  # as the tool finds it


def test_a_method_is_found_in_its_class_not_as_a_function_of_the_same_name() -> None:
    both = SOURCE + "\n\nclass Calc:\n    def add(self, a, b):\n    " + DOC + "        return b\n"
    contract = contract_of(both, "Calc.add")
    assert contract is not None and "        return b\n" not in contract
    assert "    return a - b\n" in contract  # the function add is left as it is
    assert code_of(both, "Calc.add") == code_of("def add(self, a, b):\n    return b\n", "add")
    assert code_of(both, "add") == code_of(SOURCE, "add")  # a plain name: the top level first


def test_no_contract_without_a_docstring_or_a_body_or_a_single_function() -> None:
    assert contract_of("def add(a, b):\n    return a - b\n", "add") is None
    assert contract_of("def add(a, b):\n" + DOC, "add") is None  # nothing to leave out
    assert contract_of(SOURCE + "\n" + BROKEN, "add") is None  # defined twice
    assert contract_of(SOURCE, "div") is None
    assert contract_of("class add:\n" + DOC + "    x = 1\n", "add") is None
    assert contract_of("def add(:\n", "add") is None


def test_code_of_compares_what_a_function_does_not_how_it_is_written() -> None:
    commented = "def add(a, b):\n    # The sum of a and b.\n    return a-b  # here\n"
    assert code_of(commented, "add") == code_of(SOURCE, "add")
    assert code_of("    def add(a, b):\n        return a - b\n", "add") == code_of(SOURCE, "add")
    assert code_of(FIXED, "add") != code_of(SOURCE, "add")
    assert code_of("def add(a, c):\n    return a - c\n", "add") != code_of(SOURCE, "add")
    assert code_of("x = 1\n", "add") is None


# --- in the loop, without tests ---------------------------------------------------------------


def test_a_function_re_sent_as_it_is_is_written_afresh_from_its_docstring(ws: Path) -> None:
    resp, transport = run(
        ws,
        [
            change(BROKEN, "calc.py"),  # the function as the file holds it, bug included
            written(FIXED),
            turn(answer="add adds now."),
        ],
    )
    assert resp.success, resp.error
    assert (ws / "calc.py").read_text() == FIXED + "\n\ndef mul(a, b):\n    return a * b\n"
    assert rewrite_requests(transport) == [1]
    asked = str(transport.requests[1].messages[0]["content"])
    assert "The sum of ``a`` and ``b``." in asked and "    ...\n" in asked
    assert "return a - b" not in asked  # the bug is not shown
    assert "def mul(a, b):\n    return a * b" in asked  # the rest of the file is
    made = [e for e in resp.events if e.name == "replace_function"]
    assert [(e.status, e.arguments["code"]) for e in made] == [("done", FIXED)]
    assert any("afresh from its docstring" in w for w in resp.warnings)
    # only the model could check it (here not even that): the run does not say done
    assert resp.incomplete is not None and "calc.py: add afresh" in resp.incomplete
    # the model reads the rewrite as its own reply
    replies = [str(m.get("content")) for m in resp.messages if m["role"] == "assistant"]
    assert "return a + b" in replies[0]


def test_a_definition_sent_without_its_body_gets_one_written_from_its_docstring(
    ws: Path,
) -> None:
    # The 1.5B on lcs_length: the signature and docstring, then the string closed.
    resp, transport = run(
        ws,
        [change("def add(a, b):\n" + DOC, "calc.py"), written(FIXED), turn(answer="add adds.")],
    )
    assert rewrite_requests(transport) == [1]
    assert (ws / "calc.py").read_text().startswith(FIXED)
    made = [e for e in resp.events if e.name == "replace_function"]
    assert [(e.status, e.arguments["code"]) for e in made] == [("done", FIXED)]


def test_a_definition_sent_under_another_name_gets_the_function_written_afresh(
    ws: Path,
) -> None:
    # The 1.5B on primes_up_to: `def sieve_of_eratosthenes(n): ...` sent to replace it, twice.
    renamed = "def plus(a, b):\n" + DOC + "    return a - b\n"
    resp, transport = run(
        ws, [change(renamed, "calc.py"), written(FIXED), turn(answer="add adds now.")]
    )
    assert rewrite_requests(transport) == [1]
    assert (ws / "calc.py").read_text() == FIXED + "\n\ndef mul(a, b):\n    return a * b\n"
    made = [e for e in resp.events if e.name == "replace_function"]
    assert [(e.status, e.arguments["code"]) for e in made] == [("done", FIXED)]
    assert any("defines another name" in w for w in resp.warnings)


def test_a_definition_under_another_name_is_refused_with_what_to_send(tmp_path: Path) -> None:
    source = tmp_path / "calc.py"
    source.write_text(SOURCE)
    with pytest.raises(OtherDefinition, match=r"`def add\(`.*it defines plus") as raised:
        replace_definition(source, SOURCE, "add", "def plus(a, b):\n    return a + b\n")
    assert raised.value.content == SOURCE.encode()


def test_a_fix_the_model_made_and_re_sends_is_not_written_afresh(ws: Path) -> None:
    # Its own change, re-sent as its last word: the code the task calls wrong is gone.
    resp, transport = run(
        ws,
        [change(FIXED, "calc.py"), change(FIXED, "calc.py"), turn(answer="add adds now.")],
    )
    assert rewrite_requests(transport) == []
    assert "return a + b" in (ws / "calc.py").read_text()
    made = [e for e in resp.events if e.name == "replace_function"]
    assert [e.status for e in made] == ["done", "failed"]


def test_without_a_docstring_nothing_is_asked(ws: Path) -> None:
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    resp, transport = run(
        ws,
        [change("def add(a, b):\n    return a - b\n", "calc.py"), turn(answer="It is fine.")],
    )
    assert rewrite_requests(transport) == []
    made = [e for e in resp.events if e.name == "replace_function"]
    assert len(made) == 1 and "nothing to change" in (made[0].error or "")


def test_a_rewrite_that_changes_nothing_is_dropped_and_not_asked_again(ws: Path) -> None:
    resp, transport = run(
        ws,
        [
            change(BROKEN, "calc.py"),
            written(BROKEN),  # the model writes the bug again
            change(BROKEN, "calc.py"),  # and re-sends it: not asked a second time
            turn(answer="It is fine."),
        ],
    )
    assert rewrite_requests(transport) == [1]
    assert any("written afresh from its docstring is the same" in w for w in resp.warnings)
    assert (ws / "calc.py").read_text() == SOURCE


def test_a_server_error_or_a_reply_without_the_function_keeps_the_models_reply(
    ws: Path,
) -> None:
    for trouble in (ServerError("the server went away"), {"content": "It looks right to me."}):
        (ws / "calc.py").write_text(SOURCE)
        resp, transport = run(ws, [change(BROKEN, "calc.py"), trouble, turn(answer="fine")])
        assert rewrite_requests(transport) == [1]
        assert (ws / "calc.py").read_text() == SOURCE
        made = [e for e in resp.events if e.name == "replace_function"]
        assert len(made) == 1 and "nothing to change" in (made[0].error or "")
        if isinstance(trouble, ServerError):
            assert any("could not ask the model to write add afresh" in w for w in resp.warnings)


def test_once_rewritten_the_old_code_is_refused_however_it_is_dressed(ws: Path) -> None:
    dressed = "def add(a, b):\n    # The sum of a and b.\n    return a - b  # as before\n"
    resp, _ = run(
        ws,
        [
            change(BROKEN, "calc.py"),
            written(FIXED),
            change(dressed, "calc.py"),  # the bug back, without its docstring
            turn(answer="done"),
        ],
    )
    assert "return a + b" in (ws / "calc.py").read_text()
    refused = [e for e in resp.events if e.name == "replace_function" and e.status != "done"]
    assert len(refused) == 1
    assert "which the task says is wrong" in (refused[0].error or "")


# --- in the loop, where Rune runs the tests ---------------------------------------------------

TEST_TASK = (
    "The test tests/test_calc.py::TestAdd::test_add fails. Find the bug in the library code "
    "(the tests are right) and fix it."
)


def calc_package(ws: Path) -> Path:
    """calc/ops.py with the documented bug, and tests/test_calc.py that catches it."""
    (ws / "calc").mkdir()
    (ws / "calc" / "__init__.py").write_text("")
    (ws / "calc" / "ops.py").write_text(BROKEN)
    (ws / "tests").mkdir()
    (ws / "tests" / "__init__.py").write_text("")
    (ws / "tests" / "test_calc.py").write_text(TEST_CALC)
    (ws / "calc.py").unlink()
    return ws / "calc" / "ops.py"


@needs_bwrap
def test_the_tests_judge_a_rewrite_one_that_fails_them_is_not_taken(ws: Path) -> None:
    ops = calc_package(ws)
    resp, transport = run(
        ws,
        [change(BROKEN), written(WRONG), turn(answer="I cannot find it.")],
        tests=True,
    )
    assert rewrite_requests(transport) == [1]
    assert ops.read_text() == BROKEN
    made = [e for e in resp.events if e.name == "replace_function"]
    assert len(made) == 1 and "nothing to change" in (made[0].error or "")


@needs_bwrap
def test_a_rewrite_that_passes_the_tests_is_taken_and_the_run_ends_there(ws: Path) -> None:
    ops = calc_package(ws)
    resp, transport = run(ws, [change(BROKEN), written(FIXED)], tests=True)
    assert resp.success, resp.error
    assert ops.read_text() == FIXED
    assert any("(it passes the tests)" in w for w in resp.warnings)
    assert resp.incomplete is None  # the project's tests pass: that is done
    assert "pass" in resp.text  # Rune's own summary: the tests that failed pass now
    assert len(transport.requests) == 2


@needs_bwrap
def test_a_rewrite_is_not_traded_for_samples_that_merely_move_a_wrong_check(ws: Path) -> None:
    # The 1.5B on extended_gcd: a right rewrite, then its own wrong assert; the samples that
    # move that assert are no evidence against the rewrite.
    wrong = turn(
        tool="run_python",
        arguments={"code": "from calc import add\nassert add(2, 3) == 7, add(2, 3)"},
    )
    swapped = "def add(a, b):\n" + DOC + "    return b + a\n"  # the same report: stuck
    moved = "def add(a, b):\n" + DOC + "    return a - b + 1\n"
    tools = executor(ws)
    transport = ScriptedTransport(
        [
            change(BROKEN, "calc.py"),
            written(FIXED),
            wrong,
            change(swapped, "calc.py"),
            *[change(moved, "calc.py")] * SAMPLES,
            wrong,
            turn(answer="add adds."),
            turn(answer="add adds."),
        ]
    )
    loop = LocalToolRuntime(transport, tools, model="m", protocol="constrained")
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert "return b + a" in (ws / "calc.py").read_text()
    assert not any("changes what the check reports" in w for w in resp.warnings)


# --- a library's module: too long to show whole --------------------------------------------

#: a module as a library has them: imports, then more code than a contract may show
LIBRARY = (
    "import re\nfrom math import floor\n\n"
    + "".join(f"def helper{i}(x):\n    return x + {i}\n\n\n" for i in range(400))
    + SOURCE
)


def test_a_long_modules_contract_is_its_imports_and_the_function_alone() -> None:
    assert len(contract_of(LIBRARY, "add") or "") > MAX_CONTRACT_CHARS
    local = "import re\nfrom math import floor\n\n\ndef add(a, b):\n" + DOC + "    ...\n"
    assert local_contract_of(LIBRARY, "add") == local
    assert contract_for(LIBRARY, "add") == local
    assert contract_for(SOURCE, "add") == contract_of(SOURCE, "add")  # short: the whole file
    assert contract_for(LIBRARY, "helper3") is None  # no docstring: nothing says what it does


def test_a_methods_local_contract_stands_under_its_class_line() -> None:
    method = "import re\n\n\nclass Calc(object):\n    unit = 0\n\n" + "".join(
        "    " + line if line.strip() else line for line in BROKEN.splitlines(keepends=True)
    )
    assert local_contract_of(method, "Calc.add") == (
        "import re\n\n\nclass Calc(object):\n    def add(a, b):\n    " + DOC + "        ...\n"
    )
    nested = "def outer():\n    " + "\n    ".join(BROKEN.splitlines()) + "\n    return add\n"
    assert local_contract_of(nested, "add") is None
    assert local_contract_of("def broken(:\n", "broken") is None


# --- a repair the project's tests judge: the function written afresh first --------------------


def run_repair(ws: Path, script: list[dict[str, Any]]) -> tuple[Any, Any]:
    tools = executor(ws)
    assists = standard_assists(
        auto_checks=lambda r: auto_check(r, tools.workspace, tools.policy),
        without=frozenset({"check", "again", "rewrite"}),
    )
    transport = ScriptedTransport(script)
    loop = LocalToolRuntime(transport, tools, model="m", protocol="constrained", assists=assists)
    return approve_all(loop, loop.run([{"role": "user", "content": TEST_TASK}])), transport


@needs_bwrap
def test_a_change_that_fails_the_tests_gives_way_to_the_function_written_afresh(ws: Path) -> None:
    # The repo suite: the 1.5B's own change to a library function fails the library's tests,
    # and so do six samples from a fresh start; the function written from its docstring passes.
    ops = calc_package(ws)
    resp, transport = run_repair(ws, [change(WRONG), written(FIXED)])
    assert resp.success, resp.error
    assert ops.read_text() == FIXED
    assert rewrite_requests(transport) == [1]
    asked = transport.requests[1].messages[0]["content"]
    assert "return a - b" not in asked and DOC.strip() in asked  # the bug left out
    taken = "write add afresh from its docstring, and that passes them"
    assert any(taken in w for w in resp.warnings)
    assert resp.incomplete is None


@needs_bwrap
def test_rewrites_that_fail_the_tests_are_followed_by_the_samples_once_per_run(ws: Path) -> None:
    ops = calc_package(ws)
    # after rewrites the tests failed, fewer samples from a fresh start than without them
    after = [change(WRONG)] * SAMPLES_AFTER_REWRITES
    script = [change(WRONG), *[written(WRONG)] * AFRESH_TRIES, *after]
    # then the same change again ("nothing to change"), and an answer, sent back once
    script += [change(WRONG), *[turn(answer="I cannot.")] * 2]
    resp, transport = run_repair(ws, script)
    assert not resp.success or resp.incomplete is not None  # the tests still fail
    assert rewrite_requests(transport) == list(range(1, 1 + AFRESH_TRIES))  # none asked again
    greedy, sampled, failing = (transport.requests[k] for k in range(1, 1 + AFRESH_TRIES))
    assert "temperature" not in greedy.options and "temperature" not in failing.options
    assert sampled.options["temperature"] > 0
    # the last round is shown what its rewrite must pass: the failing test's code and its
    # error (the tests' run before the change), not the buggy source; the others the contract alone
    asked = failing.messages[0]["content"]
    shown = asked.split("The tests fail now:\n", 1)[1].split("\n\nReply with", 1)[0]
    # (pytest names the test with its class, unittest without: whichever the interpreter has)
    assert shown.startswith(("FAILED test_add", "FAILED TestAdd.test_add")), shown
    assert "self.assertEqual(add(2, 3), 5)" in shown
    assert "-1 != 5" in shown and "Source of the code" not in shown and "a - b" not in shown
    assert asked.rstrip().endswith(
        "Reply with the whole definition of `add` in one ```python block."
    )
    for alone in (greedy, sampled):
        assert "The tests fail now" not in alone.messages[0]["content"]
        assert alone.messages[0]["content"] == asked.replace(
            f"The tests fail now:\n{shown}\n\n", ""
        )
    assert len(transport.requests) == len(script)
    assert ops.read_text() == WRONG
    assert SAMPLES_AFTER_REWRITES < SAMPLES


@needs_bwrap
def test_a_sample_from_a_fresh_start_still_rescues_a_change_the_rewrites_could_not(
    ws: Path,
) -> None:
    # The live test's small library: the 1.5B's first change is wrong, so are both rewrites of
    # the function it changed, and a sample from a fresh start (the last one drawn) passes.
    ops = calc_package(ws)
    moved = "def add(a, b):\n" + DOC + "    return b - a\n"
    samples = [change(moved)] * (SAMPLES_AFTER_REWRITES - 1) + [change(FIXED)]
    script = [change(WRONG), *[written(WRONG)] * AFRESH_TRIES, *samples]
    resp, transport = run_repair(ws, script)
    assert resp.success, resp.error
    assert ops.read_text() == FIXED
    drawn = AFRESH_TRIES + SAMPLES_AFTER_REWRITES
    assert any(f"of {drawn} other changes it wrote" in w for w in resp.warnings)
    assert len(transport.requests) == len(script)


@needs_bwrap
def test_a_stub_is_not_written_afresh_in_a_repair_its_docstring_is_the_task(ws: Path) -> None:
    # The spec suite: the model's first version of a stub fails the tests; the stub written
    # afresh from its docstring is the task asked again with less in front of the model.
    ops = calc_package(ws)
    ops.write_text("def add(a, b):\n" + DOC + "    raise NotImplementedError\n")
    resp, transport = run_repair(ws, [change(WRONG), change(FIXED)])
    assert resp.success, resp.error
    assert ops.read_text() == FIXED  # the first sample from a fresh start
    assert rewrite_requests(transport) == []
    assert transport.requests[1].response_schema is not None
    assert any("other changes it wrote from a fresh start" in w for w in resp.warnings)


def test_a_stub_is_a_function_with_nothing_but_a_placeholder() -> None:
    for body in ("    pass\n", "    ...\n", "    raise NotImplementedError\n"):
        assert is_stub("def add(a, b):\n" + DOC + body, "add")
        assert is_stub("class C:\n    def add(self):\n    " + body, "C.add")
    assert is_stub("def add(a, b):\n    raise NotImplementedError('later')\n", "add")
    assert not is_stub(BROKEN, "add")
    assert not is_stub("def add(a, b):\n    raise ValueError\n", "add")
    assert not is_stub("def add(a, b):\n    pass\n    return a\n", "add")
    assert not is_stub(BROKEN, "mul") and not is_stub("def add(:\n", "add")


TOTAL = (
    "\n\ndef total(xs):\n    out = 0\n    for x in xs:\n        out = add(out, x)\n    return out\n"
)
TEST_TOTAL = """\
import unittest

from calc.ops import total


class TestTotal(unittest.TestCase):
    def test_total(self):
        self.assertEqual(total([2, 3]), 5)
"""


@needs_bwrap
def test_the_function_the_failing_test_points_at_is_written_afresh_too(ws: Path) -> None:
    # inflection: a test of titleize fails for a bug in the humanize it calls; the 1.5B
    # changed titleize, and only humanize written afresh passes.
    ops = calc_package(ws)
    ops.write_text(BROKEN + TOTAL)
    (ws / "tests" / "test_calc.py").write_text(TEST_TOTAL)
    task = "The test tests/test_calc.py::TestTotal::test_total fails. Fix the library code."
    wrong_total = "def total(xs):\n    return sum(xs) + 1\n"
    script = [
        turn(
            tool="replace_function",
            arguments={"path": "calc/ops.py", "name": "total", "code": wrong_total},
        )
    ]
    tools = executor(ws)
    assists = standard_assists(
        auto_checks=lambda r: auto_check(r, tools.workspace, tools.policy),
        without=frozenset({"check", "again", "rewrite"}),
    )
    transport = ScriptedTransport([*script, written(FIXED)])
    loop = LocalToolRuntime(transport, tools, model="m", protocol="constrained", assists=assists)
    resp = approve_all(loop, loop.run([{"role": "user", "content": task}]))
    assert resp.success, resp.error
    assert ops.read_text() == FIXED + TOTAL  # total has no docstring: add is the one asked for
    assert rewrite_requests(transport) == [1]
    assert "def add(a, b)" in transport.requests[1].messages[0]["content"]


@needs_bwrap
def test_the_models_own_check_never_judges_a_rewrite_in_a_repair(ws: Path) -> None:
    wrong = turn(
        tool="run_python", arguments={"code": "from calc import add\nassert add(2, 3) == 5"}
    )
    tools = executor(ws)
    script = [change(WRONG, "calc.py"), wrong, change(WRONG, "calc.py")]
    script += [change(FIXED, "calc.py"), turn(answer="add adds.")]
    transport = ScriptedTransport(script)
    assists = standard_assists(without=frozenset({"check", "again", "rewrite"}))
    loop = LocalToolRuntime(transport, tools, model="m", protocol="constrained", assists=assists)
    resp = approve_all(loop, loop.run([{"role": "user", "content": TASK}]))
    assert resp.success, resp.error
    assert rewrite_requests(transport) == []
    assert "return a + b" in (ws / "calc.py").read_text()  # the first sample passed


# --- a second opinion, when the model's own check cannot tell its change from the bug ---------


def check(code: str) -> dict[str, Any]:
    return turn(tool="run_python", arguments={"code": "from calc import add\n" + code})


BLIND = check("assert add(0, 0) == 0")  # true of the bug, the wrong fix and the right one


@needs_bwrap
def test_a_change_its_check_cannot_tell_from_the_bug_gives_way_to_a_rewrite(ws: Path) -> None:
    # The 1.5B on merge_intervals: a change that keeps the bug, checked on a case the bug
    # never touched; the check passes, and the run would end on it.
    # Its change also put the docstring into comments: the contract is the file as it was.
    bare = "def add(a, b):\n    # The sum of a and b.\n    return a * b\n"
    resp, transport = run(
        ws,
        [change(bare, "calc.py"), BLIND, written(FIXED), BLIND, turn(answer="add adds.")],
    )
    assert rewrite_requests(transport) == [2]
    asked = str(transport.requests[2].messages[0]["content"])
    # the file as the run found it, neither body of add shown (mul's `return a * b` is)
    assert asked.count("return a * b") == 1 and "return a - b" not in asked
    assert "The sum of ``a`` and ``b``." in asked
    assert (ws / "calc.py").read_text() == FIXED + "\n\ndef mul(a, b):\n    return a * b\n"
    made = [e for e in resp.events if e.name == "replace_function"]
    assert [(e.status, e.arguments["code"]) for e in made] == [("done", bare), ("done", FIXED)]
    checks = [e for e in resp.events if e.name == "run_python"]
    assert [e.status for e in checks] == ["done"]  # the first check's turn became the rewrite
    assert any("cannot tell the change from the bug" in w for w in resp.warnings)
    assert resp.incomplete is not None and "calc.py: add afresh" in resp.incomplete


@needs_bwrap
def test_a_check_that_fails_on_the_bug_keeps_the_models_change(ws: Path) -> None:
    shows = check("assert add(2, 2) == 4")  # the bug gives 0: the check shows the change
    resp, transport = run(ws, [change(WRONG, "calc.py"), shows, turn(answer="add adds.")])
    assert rewrite_requests(transport) == []
    assert "return a * b" in (ws / "calc.py").read_text()
    assert [e.status for e in resp.events if e.name == "run_python"] == ["done"]


@needs_bwrap
def test_a_rewrite_that_fails_the_check_or_repeats_the_change_is_not_taken(ws: Path) -> None:
    against = check("assert add(1, 1) != 2")  # passes on the bug and on a * b, not on a + b
    for check_turn, reply in ((against, written(FIXED)), (BLIND, written(WRONG))):
        (ws / "calc.py").write_text(SOURCE)
        resp, transport = run(
            ws, [change(WRONG, "calc.py"), check_turn, reply, turn(answer="add adds.")]
        )
        assert rewrite_requests(transport) == [2]
        assert "return a * b" in (ws / "calc.py").read_text()
        assert [e.status for e in resp.events if e.name == "run_python"] == ["done"]
        assert not any("cannot tell the change from the bug" in w for w in resp.warnings)
