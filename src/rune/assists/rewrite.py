"""Write it afresh from its docstring, when the model re-sends a function as the file holds it.

Or when it sends the signature and docstring alone (:class:`rune.errors.MissingBody`), or
code that defines another name in its place (:class:`rune.errors.OtherDefinition`: on the
algorithm suite the 1.5B sent ``def sieve_of_eratosthenes`` for ``primes_up_to``, twice, and the
run ended in the breaker): each way it could not write the change.

Asked to fix a one-line bug in a textbook algorithm whose docstring says what is right, the
1.5B copied the function back, bug included ("nothing to change"), on most of the algorithm
suite: shown the code, it does not see the bug (asked which line is wrong, it named the right
one in 1 or 2 of the 16 tasks). Shown the signature and the docstring alone, it writes the function
from what it knows, and that version passed the hidden check in 11 of the 16 (``bench/README.md``,
eighth session). So when a ``replace_function`` call would leave its file as it is
(:class:`rune.errors.NothingToChange`) and the function has a docstring, Rune asks the model,
once per function and run, for the function written afresh from the file with that body left
out (only while the run has not changed that file: a function the model changed and re-sends
is its own fix, not the code the task calls wrong): one plain
request at the run's own temperature, no tools and no grammar, the reply's fenced block read by
Rune. The rewrite takes the reply's place when it changes the function and no assist refuses
it, and, where Rune runs the project's tests (:mod:`rune.assists.tests`) and their last run
failed, only when it passes them; otherwise the reply goes on as it was (to
:mod:`rune.assists.again`). The model then reads the rewrite as its own change, and checks it
as it would have.

Once a function was written afresh, a later change that puts its old code back (the same
statements, whatever the comments and docstring) is refused: the user said that code is wrong.
Without tests the model's own check is all that judges the rewrite, and the 1.5B's checks were
wrong as often as its rewrites (``extended_gcd(10, 6) == (2, 1, -1)``): a sampled repair
against such a check once put the bug back in place of a right rewrite. For the same reason a
run with a rewrite and no passing test run of the project's does not end done: the outcome says
that only the model's own check tried the rewrite.

A second opinion where no tests run: when the model checks its change to one function (the
run's only change) with a check that passes on the file as the run found it, too, the check
cannot tell the change from the bug. Rune then asks for the function written afresh from the
file as found, and puts it in place of the check call when it differs from the model's change
and passes that check (``algo`` 5/16 → 7/16 with the contract from the file as found,
docs/loop.md).

For a repair the project's tests judge (:mod:`rune.assists.sampled_repair`), the function the
model changed, written afresh from the file as the run found it, is the first candidate
(:mod:`rune.assists.afresh`). A library's module is too long to show whole: its contract is
the module's imports and the function alone (:func:`contract_for`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from rune.assists import repair
from rune.assists.again import changes_nothing
from rune.assists.tests import failed_test_run
from rune.calls import tool_request
from rune.errors import MissingBody, NothingToChange, OtherDefinition, RuneError
from rune.formats.constrained import ConstrainedCall
from rune.messages import Message, ToolRequest
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.runtime.blocks import code_blocks
from rune.runtime.breaker import LOOP_SOURCE
from rune.runtime.chat import ChatRequest
from rune.text import fenced, for_display
from rune.tools.python_code import code_of, contract_of, local_contract_of
from rune.tools.spec import Trials, trials_of

__all__ = [
    "MAX_CONTRACT_CHARS",
    "RewriteFromDocstring",
    "ask_for_definition",
    "contract_for",
    "function_target",
    "only_own_check",
    "rewrite_prompt",
    "write_afresh",
    "written_afresh",
]

#: the longest contract shown (a long one costs a small model minutes to read): a longer file
#: is shown as its imports and the function alone
MAX_CONTRACT_CHARS = 6000
#: the tool whose calls are rewritten: it names the function
TOOL = "replace_function"


def contract_for(source: str, name: str) -> str | None:
    """What the model is shown to write ``name`` afresh: the file with its body left out, or,
    for a file too long for that (a library's module), the file's imports and the function
    alone; None when ``name`` has no contract (:func:`~rune.tools.python_code.contract_of`)
    or it is too long even so."""
    for contract in (contract_of(source, name), local_contract_of(source, name)):
        if contract is not None and len(contract) <= MAX_CONTRACT_CHARS:
            return contract
    return None


def rewrite_prompt(path: str, name: str, contract: str, failure: str | None = None) -> str:
    """What the model is asked: ``contract`` is the file with the body of ``name`` left out;
    ``failure``, where asked for, a failing test the function is to pass (its code and its
    error, :func:`rune.tools.testing.first_failure`)."""
    failing = f"The tests fail now:\n{failure}\n\n" if failure else ""
    return (
        f"Write the code of `{name}` in {path} as its docstring says: below is the file with "
        f"that code left out (`...`). Keep its name, signature and docstring.\n\n"
        f"{path}\n{fenced(contract.rstrip(), 'python')}\n\n{failing}"
        f"Reply with the whole definition of `{name}` in one ```python block."
    )


class RewriteFromDocstring(Assist):
    """Puts the function written afresh from its docstring in place of a reply that re-sends
    it as it is."""

    name = "rewrite"

    def __init__(self, trials: Trials | None = None) -> None:
        #: None: the loop's executor, when it is one
        self._trials = trials

    def refusal(self, loop: Loop, state: LoopState, request: ToolRequest) -> str | None:
        target = function_target(request)
        old = self.recalled(state).get("old", {}).get(target[2]) if target else None
        if target is None or old is None:
            return None
        path, name, _ = target
        if code_of(str(request.arguments.get("code") or ""), name) != old:
            return None
        return (
            f"this is the code {name} in {for_display(path)} had before, which the task says "
            f"is wrong; {name} now holds a version written from its docstring. If a check "
            "fails on it, make sure the check asserts what the docstring says."
        )

    def unfinished(self, loop: Loop, state: LoopState) -> str | None:
        """A function Rune had written afresh, where no test run of the project's passed: the
        model's own check is all that tried it. On the algorithm suite two such rewrites passed
        the model's one assert and missed an edge case the old code had (``power_mod`` with a
        modulus of 1): the run must not say done on that."""
        return only_own_check(state, _afresh(self.recalled(state)))

    def replace_call(self, loop: Loop, state: LoopState, call: ToolRequest) -> ToolRequest:
        if call.name in loop.kinds.checks:
            return self._instead_of_check(loop, state, call)
        target = function_target(call)
        if target is None or state.opening is None:
            return call
        path, name, key = target
        asked = self.recalled(state).get("asked", [])
        if key in asked:
            return call
        if _changed(loop, state, path):
            # the function may be the model's own fix by now, re-sent as its last word: only
            # the code the run found is what the task says is wrong. (Where the tests judge, a
            # rewrite of the model's failing change was tried too: on spec 01-03 none passed,
            # each cost a call of 20-50 s.)
            return call
        check = failed_test_run(state.events)
        found = _could_not_write(loop, call)
        if found is None:
            return call
        content, what = found
        source = content.decode("utf-8", errors="replace")
        contract = contract_for(source, name)
        if contract is None:
            return call
        self.memory(state)["asked"] = [*asked, key]
        code = write_afresh(loop, state, call, name, contract, path=path, by=self.name)
        if code is None:
            return call
        rewrite = tool_request(TOOL, {"path": path, "name": name, "code": code}, None, call.source)
        shown = for_display(path)
        if changes_nothing(loop.executor, rewrite) is not None:
            loop.note(state, f"{shown}: {name} written afresh from its docstring is the same")
            return call
        if loop.refusal(state, rewrite) is not None:
            return call
        trials = trials_of(self._trials, loop.executor)
        if check is not None:
            trial = (
                trials.try_change(TOOL, rewrite.arguments, check.name, check.arguments)
                if trials is not None
                else None
            )
            if trial is None or not trial.passed:
                return call  # the tests judge: a rewrite that fails them is no better
        loop.note(
            state,
            f"the model {what.format(name=name, path=shown)}; Rune asked it to write {name} "
            "afresh from its docstring, and takes that"
            + (" (it passes the tests)" if check is not None else ""),
        )
        before = code_of(source, name)
        if before is not None:
            memory = self.memory(state)
            memory["old"] = {**memory.get("old", {}), key: before}
        return rewrite

    def _instead_of_check(self, loop: Loop, state: LoopState, check: ToolRequest) -> ToolRequest:
        """The rewrite in place of the model's ``check``, when the check cannot tell its change
        from the code the task calls wrong (it passes on the code as it was, too) and passes on
        the rewrite; else ``check`` itself."""
        if state.opening is None or any(e.source == LOOP_SOURCE for e in state.events):
            return check  # the project's tests judge the model's change, not its own check
        change = _only_change(loop, state)
        target = function_target(change) if change is not None else None
        if change is None or target is None:
            return check
        path, name, key = target
        memory = self.memory(state)
        asked = memory.get("asked", [])
        trials = trials_of(self._trials, loop.executor)
        if key in asked or key in _afresh(memory) or trials is None:
            return check
        before = trials.try_before_changes(check.name, check.arguments)
        if before is None or not before.passed:
            return check  # the check shows the change (or cannot say)
        # the file as the run found it: the model's change may have lost the docstring
        content = trials.content_before_changes(path)
        contract = contract_for(content.decode("utf-8", "replace"), name) if content else None
        if contract is None:
            return check
        memory["asked"] = [*asked, key]
        code = write_afresh(loop, state, change, name, contract, path=path, by=self.name)
        if code is None:
            return check
        rewrite = tool_request(TOOL, {"path": path, "name": name, "code": code}, None, check.source)
        if changes_nothing(loop.executor, rewrite) is not None:
            return check  # the model wrote the same again: its change stands
        if loop.refusal(state, rewrite) is not None:
            return check
        trial = trials.try_change(TOOL, rewrite.arguments, check.name, check.arguments)
        if trial is None or not trial.passed:
            return check
        loop.note(
            state,
            f"the model's check passes on {name} in {for_display(path)} as it was before its "
            f"change, too, so it cannot tell the change from the bug; Rune asked the model to "
            f"write {name} afresh from its docstring, and takes that (it passes the check too)",
        )
        memory["taken"] = [*memory.get("taken", []), key]
        return rewrite


def write_afresh(
    loop: Loop,
    state: LoopState,
    call: ToolRequest,
    name: str,
    contract: str,
    *,
    path: str,
    by: str,
    sampling: Mapping[str, Any] | None = None,
    failure: str | None = None,
) -> str | None:
    """The definition of ``name`` the model writes from ``contract`` in place of ``call``'s
    code, or None: one plain request, no tools and no grammar, at the run's own options and
    ``sampling`` over them; ``by``: the assist that asks; ``failure``: a failing test shown
    below the contract (:func:`rewrite_prompt`)."""
    prompt = rewrite_prompt(path, name, contract, failure)
    asking = f"to write {name} afresh"
    return ask_for_definition(loop, state, call, name, prompt, asking, by=by, sampling=sampling)


def ask_for_definition(
    loop: Loop,
    state: LoopState,
    call: ToolRequest,
    name: str,
    prompt: str,
    asking: str,
    *,
    by: str,
    sampling: Mapping[str, Any] | None = None,
) -> str | None:
    """The definition of ``name`` in the fenced blocks the model replies to ``prompt`` with,
    or None: ``prompt`` is the request's one message (no tools, no grammar), asked at the run's
    own options and ``sampling`` over them, its reply capped as ``call``'s change; ``asking``
    says what for, in the note when the model cannot be asked."""
    message: Message = {"role": "user", "content": prompt}
    try:
        # the run's options (the window, the temperature), not its context: the request is
        # this one message alone (a rewrite must not see the body it leaves out)
        base, _ = loop.shape([message])
        limit = repair.sample_limit(ConstrainedCall(call.name, call.arguments), base.options)
        options = {**(base.options or {}), **(sampling or {}), "num_predict": limit}
        reply = loop.ask(state, ChatRequest([message], options=options), None, by=by)
    except RuneError as err:
        loop.note(state, f"could not ask the model {asking}: {err}")
        return None
    text = str(reply.message.get("content") or "")
    return next((d for b in code_blocks(text) if (d := _definition(b, name))), None)


def only_own_check(state: LoopState, afresh: Iterable[str]) -> str | None:
    """Why a run is unfinished that has functions (``path::name``) written afresh in it and
    no passing test run of the project's; None when it has none of them, or such a run."""
    keys = sorted(afresh)
    if not keys or any(e.source == LOOP_SOURCE and e.status == "done" for e in state.events):
        return None
    names = ", ".join(key.replace("::", ": ", 1) for key in keys)
    return (
        f"Rune had the model write {for_display(names)} afresh from its docstring, and only "
        "the model's own check tried it: review it"
    )


def written_afresh(state: LoopState, call: ToolRequest) -> bool:
    """Whether ``call`` changes a function this run had Rune write afresh from its docstring."""
    target = function_target(call)
    return target is not None and target[2] in _afresh(
        state.assists.get(RewriteFromDocstring.name, {})
    )


def _afresh(memory: Mapping[str, Any]) -> list[str]:
    """The functions (``path::name``) Rune had written afresh in this run."""
    return [*memory.get("old", {}), *memory.get("taken", [])]


def _only_change(loop: Loop, state: LoopState) -> ToolRequest | None:
    """The run's last change, when every change it made was to that one function; else None."""
    made = [e for e in state.events if e.status == "done" and loop.executor.is_mutating(e.name)]
    targets = {function_target(tool_request(e.name, e.arguments)) for e in made}
    if not made or len(targets) != 1 or None in targets:
        return None
    return tool_request(made[-1].name, made[-1].arguments)


#: what the model did, by the error its call met (``{name}``, ``{path}`` filled in)
_COULD_NOT_WRITE: dict[type[RuneError], str] = {
    NothingToChange: "re-sent {name} in {path} as it is",
    MissingBody: "sent {name} in {path} without its body",
    OtherDefinition: "sent code for {name} in {path} that defines another name",
}


def _could_not_write(loop: Loop, call: ToolRequest) -> tuple[bytes, str] | None:
    """What the file holds and what the model did, when ``call`` could not change the
    function: it re-sends the function exactly, sends its signature and docstring alone, or
    sends a definition of another name; else None."""
    try:
        loop.executor.prepare(call.name, call.arguments)
    except (NothingToChange, MissingBody, OtherDefinition) as err:
        return (err.content, _COULD_NOT_WRITE[type(err)]) if err.content is not None else None
    except RuneError:
        return None
    return None


def _changed(loop: Loop, state: LoopState, path: str) -> bool:
    """Whether the run has changed the file ``path`` (a change to it was made)."""
    where = PurePosixPath(path)
    return any(
        event.status == "done"
        and loop.executor.is_mutating(event.name)
        and PurePosixPath(str(event.arguments.get("path") or "")) == where
        for event in state.events
    )


def function_target(call: ToolRequest) -> tuple[str, str, str] | None:
    """``(path, name, key)`` of a replace_function call, else None."""
    path, name = call.arguments.get("path"), call.arguments.get("name")
    if call.name != TOOL or not isinstance(path, str) or not isinstance(name, str):
        return None
    return path, name.strip(), f"{path}::{name.strip()}"


def _definition(block: str, name: str) -> str | None:
    """The source of the definition of ``name`` (its last part) in ``block``, or None."""
    short = name.rsplit(".", 1)[-1]
    try:
        tree = ast.parse(block)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = block.splitlines(keepends=True)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == short:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return "".join(lines[start - 1 : node.end_lineno])
    return None
