"""The first answer of a run that changed nothing goes back once when the task asks for a change
(rune.assists.unchanged), over the real Ollama wire."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.ollama_server import FakeModel, FakeOllama, text_reply, tool_call, tool_reply
from rune.assists import standard_assists
from rune.assists.offer import OFFER_OPENING, named_functions
from rune.assists.unchanged import ECHOED, REMINDER, REPEATED, asks_for_a_change
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.commands import bwrap_works, find_bwrap
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.tools.testing import auto_check
from rune.transport.ollama import OllamaChatTransport

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
FIX_TASK = "add() in calc.py subtracts. Find the bug and fix it."


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools"))]) as server:
        yield server


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(BROKEN)
    return tmp_path


def loop(ollama: FakeOllama, project: Path) -> LocalToolRuntime:
    executor = ToolExecutor(SandboxPolicy.workspace_only(project), project)
    transport = OllamaChatTransport(ollama.url, read_timeout=5)
    # as the rune command picks them (rune.app.assists_for): a library caller's loop has no
    # such reminder by default, and an answer ends its run (test_loop)
    assists = standard_assists(unchanged=True)
    return LocalToolRuntime(transport, executor, model="qwen3", protocol="native", assists=assists)


def fix_call() -> object:
    return tool_reply(
        tool_call("replace_function", {"path": "calc.py", "name": "add", "code": FIXED})
    )


def last_user_message(ollama: FakeOllama, request: int) -> str:
    return str(ollama.bodies()[request]["messages"][-1]["content"])


def test_an_explanation_instead_of_a_fix_is_sent_back_once(
    ollama: FakeOllama, project: Path
) -> None:
    ollama.script(
        text_reply("The bug is that add subtracts: it should return a + b."),
        fix_call(),
        text_reply("add() adds now."),
    )
    runtime = loop(ollama, project)
    response = runtime.run([{"role": "user", "content": FIX_TASK}])
    assert response.pending is not None
    assert last_user_message(ollama, 1) == REMINDER
    response = runtime.approve(response.pending_state)
    assert response.success and response.text == "add() adds now."
    assert (project / "calc.py").read_text() == FIXED


def test_the_reminder_is_given_once(ollama: FakeOllama, project: Path) -> None:
    ollama.script(text_reply("It subtracts."), text_reply("No change is needed: it is meant so."))
    response = loop(ollama, project).run([{"role": "user", "content": FIX_TASK}])
    assert response.success and response.text == "No change is needed: it is meant so."
    assert len(ollama.bodies()) == 2
    assert (project / "calc.py").read_text() == BROKEN


def test_an_answer_that_repeats_the_reminder_is_not_done(ollama: FakeOllama, project: Path) -> None:
    # the 1.5B, on the algorithm suite: the reminder's own words as its answer
    ollama.script(text_reply("It subtracts."), text_reply(REMINDER))
    response = loop(ollama, project).run([{"role": "user", "content": FIX_TASK}])
    assert response.success and response.outcome == "incomplete"
    assert response.incomplete == ECHOED
    # an answer of its own stands (test_the_reminder_is_given_once): "done", nothing changed
    ollama.script(text_reply("It subtracts."), text_reply("It is meant so."))
    assert loop(ollama, project).run([{"role": "user", "content": FIX_TASK}]).outcome == "done"


def test_the_answer_sent_back_given_again_is_not_done(ollama: FakeOllama, project: Path) -> None:
    # the 1.5B, on the algorithm suite: the same account of the bug, word for word, twice
    account = "The bug is that add subtracts: it  should return a + b."
    ollama.script(text_reply(account), text_reply(account.replace("  ", " ") + "\n"))
    response = loop(ollama, project).run([{"role": "user", "content": FIX_TASK}])
    assert response.success and response.outcome == "incomplete"
    assert response.incomplete == REPEATED
    assert (project / "calc.py").read_text() == BROKEN


DOCUMENTED = '"""The sum of a and b."""'
SORTING = """\
def partition(items, lo, hi):
    return lo


def quicksort(items, lo=0, hi=None):
    p = partition(items, lo, hi)
    return sorted(items)


def unrelated():
    return 1
"""


def documented(code: str) -> str:
    return code.replace(":\n", f":\n    {DOCUMENTED}\n", 1)


def fenced(code: str) -> object:
    """The model's plain reply to a request to write a function afresh."""
    return text_reply(f"Here it is:\n\n```python\n{code}```\n")


def test_named_functions_are_those_the_request_names_and_what_they_call() -> None:
    files = {"quick.py": SORTING.encode()}
    found = named_functions("`quicksort` in quick.py is wrong; see also lib.py", files.get)
    assert found == [("quick.py", "quicksort"), ("quick.py", "partition")]
    # a name in another file, an attribute, or a file that is not there are none of them
    assert named_functions("fix x.quicksort in quick.py", files.get) == []
    assert named_functions("fix quicksort in other.py", files.get) == []


def test_an_echoed_reminder_gets_the_named_function_written_afresh(
    ollama: FakeOllama, project: Path
) -> None:
    (project / "calc.py").write_text(documented(BROKEN))
    ollama.script(
        text_reply("It subtracts."),
        text_reply(REMINDER),  # the 1.5B on algo 13: the reminder as its answer
        fenced(documented(FIXED)),  # Rune's plain request: add written afresh
        tool_reply(
            tool_call(
                "replace_function",
                {"path": "calc.py", "name": "add", "code": documented(FIXED)},
            )
        ),
        text_reply("add() adds now."),
    )
    runtime = loop(ollama, project)
    response = runtime.run([{"role": "user", "content": FIX_TASK}])
    asked = ollama.bodies()[2]["messages"]
    assert len(asked) == 1 and "Write the code of `add` in calc.py" in asked[0]["content"]
    offer = last_user_message(ollama, 3)
    assert offer.startswith(OFFER_OPENING) and documented(FIXED).rstrip() in offer
    assert response.pending is not None  # the model's own change, approved as any other
    response = runtime.approve(response.pending_state)
    assert (project / "calc.py").read_text() == documented(FIXED)
    # only the model's own check could try the rewrite: the run does not say done
    assert response.success and response.outcome == "incomplete"
    assert response.incomplete is not None and "afresh" in response.incomplete


def test_a_rewrite_the_same_as_the_file_is_not_offered(ollama: FakeOllama, project: Path) -> None:
    (project / "calc.py").write_text(documented(BROKEN))
    ollama.script(text_reply("It subtracts."), text_reply(REMINDER), fenced(documented(BROKEN)))
    response = loop(ollama, project).run([{"role": "user", "content": FIX_TASK}])
    assert response.outcome == "incomplete" and response.incomplete == ECHOED
    assert len(ollama.bodies()) == 3  # the rewrite asked once, no offer made
    assert (project / "calc.py").read_text() == documented(BROKEN)


def test_a_rewrite_that_returns_nothing_where_the_file_returns_is_not_offered(
    ollama: FakeOllama, project: Path
) -> None:
    (project / "calc.py").write_text(documented(BROKEN))
    lost_return = documented("def add(a, b):\n    total = a + b\n")
    ollama.script(text_reply("It subtracts."), text_reply(REMINDER), fenced(lost_return))
    response = loop(ollama, project).run([{"role": "user", "content": FIX_TASK}])
    assert response.outcome == "incomplete" and response.incomplete == ECHOED
    assert len(ollama.bodies()) == 3  # the rewrite asked once, no offer made


def test_an_answer_that_echoes_the_offer_is_not_done(ollama: FakeOllama, project: Path) -> None:
    (project / "calc.py").write_text(documented(BROKEN))
    ollama.script(
        text_reply("It subtracts."),
        text_reply(REMINDER),
        fenced(documented(FIXED)),
        text_reply(f"{OFFER_OPENING} Rune asked for this function"),
    )
    response = loop(ollama, project).run([{"role": "user", "content": FIX_TASK}])
    assert response.outcome == "incomplete" and response.incomplete == ECHOED
    assert len(ollama.bodies()) == 4  # offered once: no second rewrite
    assert (project / "calc.py").read_text() == documented(BROKEN)


def test_a_question_is_answered_without_a_reminder(ollama: FakeOllama, project: Path) -> None:
    ollama.script(text_reply("It holds add(), which subtracts."))
    response = loop(ollama, project).run([{"role": "user", "content": "What is in calc.py?"}])
    assert response.success and len(ollama.bodies()) == 1


def test_a_rejected_change_is_the_users_word(ollama: FakeOllama, project: Path) -> None:
    ollama.script(fix_call(), text_reply("Left as it is, as you asked."))
    runtime = loop(ollama, project)
    response = runtime.run([{"role": "user", "content": FIX_TASK}])
    assert response.pending is not None
    response = runtime.reject(response.pending_state, "leave it")
    assert response.success and response.text == "Left as it is, as you asked."
    assert len(ollama.bodies()) == 2


@pytest.mark.parametrize(
    ("request_text", "asks"),
    [
        ("Fix the bug in lcs.py", True),
        ("`best_value` does not do what its docstring says. Find the bug and fix it.", True),
        ("Write the function parse_duration in durations.py", True),
        ("What does this project do?", False),
        ("Explain the prefix function in kmp.py", False),
    ],
)
def test_which_requests_ask_for_a_change(request_text: str, asks: bool) -> None:
    assert asks_for_a_change(request_text) is asks


BWRAP = find_bwrap()
TEST_CALC = """\
import unittest

from calc import add


class TestAdd(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
"""


TESTED_TASK = "The test test_calc.py::TestAdd::test_add fails. Fix add() in calc.py."
needs_bwrap = pytest.mark.skipif(
    BWRAP is None or not bwrap_works(BWRAP), reason="bubblewrap cannot build a sandbox here"
)


def loop_running_tests(ollama: FakeOllama, project: Path) -> LocalToolRuntime:
    """The loop as the rune command builds it where the workspace has tests Rune runs."""
    executor = ToolExecutor(SandboxPolicy.default(home=project.parent), project)
    assists = standard_assists(
        auto_checks=lambda request: auto_check(request, project, executor.policy), unchanged=True
    )
    transport = OllamaChatTransport(ollama.url, read_timeout=5)
    return LocalToolRuntime(transport, executor, model="qwen3", protocol="native", assists=assists)


@needs_bwrap
def test_where_the_tests_fail_only_a_rewrite_that_passes_them_is_offered(
    ollama: FakeOllama, project: Path
) -> None:
    (project / "calc.py").write_text(documented(BROKEN))
    (project / "test_calc.py").write_text(TEST_CALC)
    wrong = documented("def add(a, b):\n    return a * b\n")
    ollama.script(text_reply("The tests pass now."), text_reply(REMINDER), fenced(wrong))
    response = loop_running_tests(ollama, project).run([{"role": "user", "content": TESTED_TASK}])
    assert str(response.incomplete).endswith(ECHOED) and len(ollama.bodies()) == 3  # no offer
    ollama.script(
        text_reply("The tests pass now."),
        text_reply(REMINDER),
        fenced(documented(FIXED)),
        text_reply("add() is right as it is."),
    )
    loop_running_tests(ollama, project).run([{"role": "user", "content": TESTED_TASK}])
    offer = str(ollama.bodies()[-1]["messages"][-1]["content"])
    assert offer.startswith(OFFER_OPENING) and "It passes the project's tests." in offer
    assert documented(FIXED).rstrip() in offer
    assert (project / "calc.py").read_text() == documented(BROKEN)  # the model did not take it


@needs_bwrap
def test_the_tests_failing_before_the_first_turn_do_not_keep_the_reminder_away(
    ollama: FakeOllama, project: Path
) -> None:
    """The tests Rune runs before the first turn fail: that is why the task asks for a change,
    not a failure of the model's, so an answer with no change still goes back."""
    (project / "test_calc.py").write_text(TEST_CALC)
    runtime = loop_running_tests(ollama, project)
    ollama.script(text_reply("The tests pass now."), fix_call())
    response = runtime.run([{"role": "user", "content": TESTED_TASK}])
    assert last_user_message(ollama, 1) == REMINDER
    assert response.pending is not None
    response = runtime.approve(response.pending_state)
    assert response.success and (project / "calc.py").read_text() == FIXED
