"""Small-model help as a layer over the loop (:mod:`rune.runtime.assist` is the seam).

Each assist is one module: :mod:`~rune.assists.tests` (tests drive the loop),
:mod:`~rune.assists.keep` (a change that breaks passing tests is not made),
:mod:`~rune.assists.check` (check before answer), :mod:`~rune.assists.nudge` (nudge after
failure), :mod:`~rune.assists.unchanged` (nudge when nothing changed; its second nudge
shows the named functions written afresh: :mod:`~rune.assists.offer`),
:mod:`~rune.assists.valid` (ask for plain Python when a change's code does not parse),
:mod:`~rune.assists.sampled_repair` (sampled repair; its first candidates where the tests judge:
:mod:`~rune.assists.afresh`), :mod:`~rune.assists.rewrite` (write a function afresh from its
docstring when the model re-sends it as it is),
:mod:`~rune.assists.revise` (shown the failing test, fix a function the model re-sends as
the run found it), :mod:`~rune.assists.again` (ask again when a change changes nothing),
:mod:`~rune.assists.reask` (ask again when a reply is cut off). :func:`standard_assists` is
the list the loop runs unless its caller picks another (the composition root does,
``rune.app``).
"""

from __future__ import annotations

from rune.assists.again import ReaskWhenNoChange
from rune.assists.check import CheckBeforeAnswer
from rune.assists.keep import KeepWhatPasses
from rune.assists.nudge import NudgeAfterFailure
from rune.assists.reask import ReaskWhenCut
from rune.assists.revise import ReviseFromFailure
from rune.assists.rewrite import RewriteFromDocstring
from rune.assists.sampled_repair import SampledRepair
from rune.assists.tests import TestDriven
from rune.assists.unchanged import NudgeWhenUnchanged
from rune.assists.valid import PlainWhenInvalid
from rune.runtime.assist import Assist
from rune.tools.spec import AutoChecks, Trials

__all__ = [
    "ASSIST_NAMES",
    "CheckBeforeAnswer",
    "KeepWhatPasses",
    "NudgeAfterFailure",
    "NudgeWhenUnchanged",
    "PlainWhenInvalid",
    "ReaskWhenCut",
    "ReaskWhenNoChange",
    "ReviseFromFailure",
    "RewriteFromDocstring",
    "SampledRepair",
    "TestDriven",
    "standard_assists",
]

#: every assist's name, in the order the loop runs them
ASSIST_NAMES = (
    "tests",
    "keep",
    "check",
    "nudge",
    "unchanged",
    "valid",
    "repair",
    "rewrite",
    "revise",
    "again",
    "reask",
)


def standard_assists(
    *,
    auto_checks: AutoChecks | None = None,
    trials: Trials | None = None,
    without: frozenset[str] = frozenset(),
    unchanged: bool = False,
    reask: bool = False,
    ends_on_proof: bool = False,
) -> list[Assist]:
    """Every assist that has what it needs (the tests need ``auto_checks``; the repair tries
    changes with ``trials``, by default the loop's executor when it can), but those named in
    ``without``. ``unchanged`` adds the reminder when nothing changed, which the ``rune``
    command runs: a library caller's loop keeps the design's rule that an answer ends the run
    (a question asked as "fix..." is still answered). ``reask`` adds asking again when a reply
    is cut off, which the command runs too (a library caller's cut reply goes back to the
    model as unusable, one model call each, as the design counts them). ``ends_on_proof``
    ends a run on the model's check that shows its change, with Rune's answer
    (:class:`CheckBeforeAnswer`), which the command runs too."""
    tests = TestDriven(auto_checks) if auto_checks is not None and "tests" not in without else None
    assists: list[Assist | None] = [
        tests,
        KeepWhatPasses(trials) if tests is not None else None,
        CheckBeforeAnswer(tests, trials, ends_on_proof=ends_on_proof),
        NudgeAfterFailure(),
        NudgeWhenUnchanged(trials) if unchanged else None,
        PlainWhenInvalid(),
        SampledRepair(trials),
        RewriteFromDocstring(trials),
        ReviseFromFailure(trials),
        ReaskWhenNoChange(trials),
        ReaskWhenCut() if reask else None,
    ]
    return [a for a in assists if a is not None and a.name not in without]
