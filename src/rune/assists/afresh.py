"""Functions written afresh from their docstrings as a repair's first candidates.

Where the project's tests judge a repair (:mod:`rune.assists.sampled_repair`), a wrong change
can be told from a right one, so the functions in question are written afresh from their
contracts (:mod:`rune.assists.rewrite`) and tried before samples from a fresh start: the one
the model changed, then those the failing tests point at.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from rune.assists import repair
from rune.assists.rewrite import TOOL, contract_for, function_target, write_afresh
from rune.calls import tool_request
from rune.formats.constrained import ConstrainedCall
from rune.messages import ToolRequest
from rune.pause.state import LoopState
from rune.runtime.assist import Loop
from rune.tools import testing
from rune.tools.python_code import is_stub
from rune.tools.spec import Trials

__all__ = [
    "AFRESH_FUNCTIONS",
    "AFRESH_ROUNDS",
    "AFRESH_TEMPERATURE",
    "AFRESH_TRIES",
    "AfreshRound",
    "afresh_samples",
]


@dataclass(frozen=True)
class AfreshRound:
    """One round of writing the functions afresh: at the run's own options or sampled (at
    :data:`AFRESH_TEMPERATURE`), and with the first failing test below the contract or not."""

    name: str
    sampled: bool = False
    shows_failure: bool = False


#: the rounds, in order: the contract alone, at the run's options and then sampled, and last
#: the contract with the failing test below it. Shown the failing test, the 1.5B's rewrite of
#: inflection's ``camelize`` passed where it had failed without it, but those of more-itertools'
#: ``powerset`` and boltons' ``indent`` failed where they had passed without it; and asked before
#: the sampled round, it changed what that round drew (``indent``'s passed no more): llama.cpp's
#: numbers depend on what its cache holds (``bench/README.md``, twenty-third session)
AFRESH_ROUNDS = (
    AfreshRound("greedy"),
    AfreshRound("sampled", sampled=True),
    AfreshRound("failing", shows_failure=True),
)
AFRESH_TRIES = len(AFRESH_ROUNDS)
AFRESH_TEMPERATURE = 0.8
#: the seed the sampled round drew with as the second of two rounds, where it was measured
_SAMPLED_SEED = repair.FIRST_SEED + 1
#: the functions written afresh for one repair: the one the model changed, and where the
#: failing tests point
AFRESH_FUNCTIONS = 3


def afresh_samples(
    loop: Loop,
    state: LoopState,
    call: ToolRequest,
    trials: Trials,
    report: str,
    asked: list[str],
    *,
    by: str,
) -> Iterator[ConstrainedCall]:
    """Candidates for a repair that the project's tests judge: the function ``call`` changes,
    then the other project functions the failing tests' ``report`` shows (a test of ``titleize``
    fails for a bug in the ``humanize`` it calls, and the 1.5B changed ``titleize``), up to
    :data:`AFRESH_FUNCTIONS`, each written afresh from its contract in the file as the run
    found it, in the :data:`AFRESH_ROUNDS`, each asked only when the one before was not
    taken. Shown only its docstring and its imports, the 1.5B
    wrote the function a library's planted bug is in so that the library's tests passed in 7
    of 23 tasks (``bench/README.md``, eleventh session).

    ``asked`` holds what the run asked already (``path::name::round``; each new request is
    added): the same request draws the same function, and a later repair of another change
    often points at the same functions (10-30 s a request on 2 cores). A stub is not written
    afresh: its docstring is the task itself, which the model's own change answered with the
    files and the failing tests in front of it (on the spec suite such rewrites never passed,
    and took a run from 229 s to 403 s)."""
    target = function_target(call)
    if target is None:
        return
    targets: list[tuple[str, str, ToolRequest | None]] = [(target[0], target[1], call)]
    for path, name in testing.shown_functions(report):
        if len(targets) == AFRESH_FUNCTIONS:
            break
        if any(_same(path, name, p, n) for p, n, _ in targets):
            continue
        targets.append((path, name, None))
    contracts: list[tuple[str, str, str, ToolRequest]] = []
    for path, name, sized in targets:
        content = trials.content_before_changes(path)
        source = content.decode("utf-8", "replace") if content else ""
        contract = contract_for(source, name) if source and not is_stub(source, name) else None
        if contract is not None:
            # a sample's output cap is sized by what it replaces: the model's change, or the
            # contract of a function it did not change
            like = sized or tool_request(TOOL, {"path": path, "name": name, "code": contract})
            contracts.append((path, name, contract, like))
    failure = testing.first_failure(report)
    for round_ in AFRESH_ROUNDS:
        if round_.shows_failure and failure is None:
            continue
        sampling = (
            {"temperature": AFRESH_TEMPERATURE, "seed": _SAMPLED_SEED} if round_.sampled else None
        )
        for path, name, contract, like in contracts:
            key = f"{PurePosixPath(path)}::{name.rsplit('.', 1)[-1]}::{round_.name}"
            if key in asked:
                continue
            asked.append(key)
            code = write_afresh(
                loop,
                state,
                like,
                name,
                contract,
                path=path,
                by=by,
                sampling=sampling,
                failure=failure if round_.shows_failure else None,
            )
            if code is not None:
                yield ConstrainedCall(TOOL, {"path": path, "name": name, "code": code})


def _same(path: str, name: str, other_path: str, other_name: str) -> bool:
    """Whether two (path, name) pairs name one function (``C.f`` and ``f`` alike)."""
    return PurePosixPath(path) == PurePosixPath(other_path) and (
        name.rsplit(".", 1)[-1] == other_name.rsplit(".", 1)[-1]
    )
