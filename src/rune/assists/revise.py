"""Shown the failing test, the model fixes the function it re-sends as the run found it.

Asked to fix a planted bug in a library, the 1.5B re-sends the function as the file holds it,
bug included ("nothing to change"), and the function written afresh from its docstring
(:mod:`rune.assists.rewrite`) and the samples asked again (:mod:`rune.assists.again`) fail the
tests too: on the repository suite three runs ended so, in the breaker. Asked in a plain
request, no tools and no grammar, as a person would ask, with the code as the file holds it,
the first failing test and its error (:func:`rune.tools.testing.first_failure`) and "fix it",
the 1.5B fixed toolz's ``nth`` (``islice(seq, n + 1, None)``), one of the three. So where the
tests judge the run, a reply that re-sends a function the run has not changed since the tests
last failed is first answered so: one request at the run's own options, once per function and
run; the fix takes the reply's place when it passes the tests in the sandbox (nothing written,
:class:`rune.tools.spec.Trials`), or leaves fewer of them failing, and no assist refuses it.

Not for the run's own change sent again (:func:`rune.assists.again.judged_change`): shown its
own failing change and the test, the 1.5B copied it back, or wrote another that failed, in
all 12 such dead ends of the repository suite and all 13 of the spec suite; asked without its
code, or told its version is wrong, in none of the spec suite's either (``bench/README.md``,
twenty-fourth session).
"""

from __future__ import annotations

from rune.assists import repair
from rune.assists.again import changes_nothing, judged_change
from rune.assists.rewrite import MAX_CONTRACT_CHARS, TOOL, ask_for_definition, function_target
from rune.assists.tests import failed_test_run, started_with_tests
from rune.calls import tool_request
from rune.messages import ToolRequest
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.text import fenced, for_display
from rune.tools import testing
from rune.tools.python_code import local_view_of
from rune.tools.spec import Trials, trials_of

__all__ = ["ReviseFromFailure", "revise_prompt"]


def revise_prompt(path: str, name: str, code: str, failure: str) -> str:
    """What the model is asked: ``code`` is the file as it is now (or the part ``name``
    needs), ``failure`` the first failing test, its code and its error."""
    return (
        f"The tests fail with the code of `{name}` in {path}:\n\n"
        f"{path}\n{fenced(code.rstrip(), 'python')}\n\n"
        f"The tests fail now:\n{failure}\n\n"
        f"Fix the code of `{name}` so that the tests pass. Keep its name and signature. "
        f"Reply with the whole definition of `{name}` in one ```python block."
    )


class ReviseFromFailure(Assist):
    """Puts the function fixed in a plain request shown the failing test in place of a reply
    that re-sends it as it is."""

    name = "revise"

    def __init__(self, trials: Trials | None = None) -> None:
        #: None: the loop's executor, when it is one
        self._trials = trials

    def replace_call(self, loop: Loop, state: LoopState, call: ToolRequest) -> ToolRequest:
        target = function_target(call)
        if target is None or not started_with_tests(state):
            return call
        path, name, key = target
        asked = self.recalled(state).get("asked", [])
        if key in asked:
            return call
        executor = loop.executor
        nothing = changes_nothing(executor, call)
        if nothing is None or nothing.content is None:
            return call
        if judged_change(executor, state, call) is not None:
            return call  # its own failing change: shown it, the model copies it back
        check = failed_test_run(state.events)
        trials = trials_of(self._trials, executor)
        failure = testing.first_failure(check.error or "") if check is not None else None
        if check is None or trials is None or failure is None:
            return call
        source = nothing.content.decode("utf-8", "replace")
        view = local_view_of(source, name) if len(source) > MAX_CONTRACT_CHARS else None
        code = view[0] if view is not None else source
        if len(code) > MAX_CONTRACT_CHARS:
            return call
        self.memory(state)["asked"] = [*asked, key]
        prompt = revise_prompt(path, name, code, failure)
        fixed = ask_for_definition(loop, state, call, name, prompt, f"to fix {name}", by=self.name)
        if fixed is None:
            return call
        fix = tool_request(TOOL, {"path": path, "name": name, "code": fixed}, None, call.source)
        if changes_nothing(executor, fix) is not None or loop.refusal(state, fix) is not None:
            return call
        trial = trials.try_change(TOOL, fix.arguments, check.name, check.arguments)
        if trial is None:
            return call
        fewer = repair.progress(testing.tally(trial.report), testing.tally(check.error or ""))
        if not (trial.passed or fewer):
            return call
        how = "it passes the tests" if trial.passed else "fewer tests fail with it"
        loop.note(
            state,
            f"the model re-sent {name} in {for_display(path)} as it is; Rune showed it the "
            f"failing test and asked for a fix, and takes that ({how})",
        )
        return fix
