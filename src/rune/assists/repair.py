"""Sampled repair: other fixes from a small model that keeps sending one its own check fails.

Once a wrong fix is in a small model's context, greedy decoding sends it again and again, even
right after the model's own check showed it fail (task suite: fizzbuzz, palindrome). Asked
again from the request alone at temperature 1, the same model writes the right fix in about
half of its tries (``bench/README.md``). So, under the constrained protocol, when a reply is a
change that the run's last failed check shows to be wrong (tried in the sandbox, nothing
written: :class:`rune.tools.spec.Trials`), the loop draws up to :data:`SAMPLES` other
changes from a fresh start (the system context and the request, each with its own seed),
tries each against that check, and puts the first that passes in place of the reply. When
none passes and the reply leaves the check's report exactly as it was (the model is stuck:
the same change again, or one that changes nothing the check sees), a sample that changes
the report takes its place, one of those most samples agree on, when both fail at an assert
(the code ran and gave another value): the check itself may be too strict to pass (a float
compared with ``==``), and a change that moves it is progress the stuck reply is not.

A check is used so only when it fails on the code as it was before the run changed it: one
that passes there does not show the bug (a small model once asserted the buggy behaviour of
a mutable default), and would pick a wrong change over a right one; one that fails in its own
code (a name it never imported) shows nothing either.

When the check is a test run and no sample passes, the sample that leaves the fewest tests
failing takes the reply's place when that is fewer than the code as it is (or the reply)
leaves, of as many tests run (:func:`rune.tools.testing.tally`): a spec's test file grades a
change test by test, and the model goes on from the better code. No repair starts for a reply
that makes fewer tests fail and leaves each other test failing as it failed on the code the run
found: the rest is another bug's, and no change in the reply's place could fix that one too.
For the same reason the drawing stops at the first candidate that does so.

Nothing else changes: the change is the model's own, the user approves it like any other, and
the model still checks it before it may answer. A repair's samples belong to the step they
repair; at most :data:`MAX_REPAIRS` per run and one more after each that made fewer tests fail
(:data:`MAX_MORE_REPAIRS` at most), so a run makes at most ``max_iterations + (MAX_REPAIRS +
MAX_MORE_REPAIRS) * SAMPLES`` model calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rune.calls import tool_request
from rune.errors import RuneError
from rune.formats.constrained import ConstrainedCall, parse_turn, reply
from rune.messages import ToolEvent
from rune.tools import testing
from rune.tools.spec import Trial

#: alternatives drawn for one repair
SAMPLES = 6
#: ...and after the changed functions written afresh (:mod:`rune.assists.afresh`) failed the
#: project's tests: in three whole repo runs, 312 samples drawn after such rewrites in 52 failing
#: runs passed none, yet on a small library (the live test) the first one rescued a wrong change
#: the rewrites could not (``bench/README.md``, sixteenth and seventeenth sessions)
SAMPLES_AFTER_REWRITES = 2
#: sampled repairs in one run...
MAX_REPAIRS = 1
#: ...and one more after each that made fewer tests fail, up to this many more
MAX_MORE_REPAIRS = 2
TEMPERATURE = 1.0
#: the seed of the first sample (the next ones count up), so a run repeats
FIRST_SEED = 101
#: a sample's output cap: this many times the size of the change it replaces, in tokens...
SIZE_FACTOR = 2
#: ...and this many more (a fix may be longer than the wrong change)
SLACK = 256
CHARS_PER_TOKEN = 3


def failed_check(events: Sequence[ToolEvent], check_tools: frozenset[str]) -> ToolEvent | None:
    """The run's latest check when it failed; None when it passed or there was none."""
    for event in reversed(events):
        if event.name in check_tools:
            return event if event.status == "failed" else None
    return None


def sample_limit(change: ConstrainedCall, options: Mapping[str, Any] | None) -> int:
    """The output tokens a sample in place of ``change`` may take: :data:`SIZE_FACTOR` times
    the change's size and :data:`SLACK` more, never above the run's own cap (``num_predict``).
    Sampled at temperature 1 a small model sometimes runs on inside its code until the cap: on
    a library's 20-line function, six such samples took the 1.5B ten minutes."""
    size = len(reply(change)) // CHARS_PER_TOKEN
    limit = SIZE_FACTOR * size + SLACK
    own = (options or {}).get("num_predict")
    return min(limit, own) if isinstance(own, int) and own > 0 else limit


def sample_changes(
    ask: Callable[[Mapping[str, Any]], str],
    options: Mapping[str, Any] | None,
    tool_names: frozenset[str],
    limit: int | None = None,
    count: int = SAMPLES,
    first_seed: int = FIRST_SEED,
) -> Iterator[ConstrainedCall]:
    """Up to ``count`` calls the model writes at :data:`TEMPERATURE`, one per seed from
    ``first_seed`` on: ``ask(options)`` makes one model call (constrained to changes) and gives
    its reply (replies that name no call are skipped); ``limit``: the output tokens of each."""
    for k in range(count):
        sampling = {**(options or {}), "temperature": TEMPERATURE, "seed": first_seed + k}
        if limit is not None:
            sampling["num_predict"] = limit
        turn = parse_turn(ask(sampling), tool_names)
        if turn.call is not None:
            yield turn.call


@dataclass(frozen=True, slots=True)
class Pick:
    """What a repair found: the change to offer (None: keep the reply), whether it passes the
    check (else it makes fewer tests fail, ``fewer``: the tally it leaves, or it moves a stuck
    report), how many samples were drawn, and the error that stopped the drawing, if one did."""

    call: ConstrainedCall | None
    passes: bool
    drawn: int
    error: RuneError | None = None
    fewer: Tally | None = None


#: (tests run, tests failing) of a test run (:func:`rune.tools.testing.tally`)
Tally = tuple[int, int]


def progress(tally: Tally | None, baseline: Tally | None) -> bool:
    """Whether ``tally`` has fewer tests failing than ``baseline``, of as many run."""
    return (
        tally is not None
        and baseline is not None
        and tally[0] == baseline[0]
        and tally[1] < baseline[1]
    )


def only_others_fail(own: Trial, before: Trial, now: Tally | None) -> bool:
    """Whether the change whose trial is ``own`` makes fewer tests fail than the code as it
    is (``now``), and each test it leaves failing fails as it did on the code as the run found
    it (``before``): the change fixed what it set out to and moved nothing else. What still
    fails is another bug's (a project with a bug in each of three modules); no one change in
    its place could pass every test, so samples drawn for that are calls spent for nothing
    (six of them, 45 s, after the reply that fixed the second of those three bugs)."""
    if not own.made or own.failing is None or before.failing is None:
        return False
    return progress(testing.tally(own.report), now) and not (
        Counter(own.failing) - Counter(before.failing)
    )


def signature(call: ConstrainedCall) -> str:
    return tool_request(call.name, call.arguments).signature


def pick(
    samples: Iterable[ConstrainedCall],
    attempt: Callable[[ConstrainedCall], Trial | None],
    own: Trial,
    *,
    stuck: bool,
    tried: set[str],
    baseline: Tally | None = None,
    enough: Callable[[Trial], bool] | None = None,
) -> Pick:
    """The first sample that passes the check; else the one that leaves the fewest tests
    failing when that is fewer than ``baseline`` (the code as it is, or the reply: a test
    suite grades a change tests at a time; the first drawn on a tie), the drawing stopped at
    one whose trial is ``enough`` (all one change can do: :func:`only_others_fail`); else, for
    a ``stuck`` reply that failed at an assert (``own``), the sample most others agree with
    among those that move the assert's report (the first drawn on a tie: the model's own
    majority, as in self-consistency). Samples in ``tried`` (signatures) are not tried again."""
    drawn = 0
    moved: dict[str, list[ConstrainedCall]] = {}
    fewest: tuple[Tally, ConstrainedCall] | None = None
    error: RuneError | None = None
    try:
        for sample in samples:
            drawn += 1
            if signature(sample) in tried:
                continue
            tried.add(signature(sample))
            trial = attempt(sample)
            if trial is None:
                continue
            if trial.passed:
                return Pick(sample, passes=True, drawn=drawn)
            tally = testing.tally(trial.report)
            if progress(tally, fewest[0] if fewest else baseline):
                assert tally is not None
                fewest = (tally, sample)
                if enough is not None and enough(trial):
                    break
            if stuck and own.asserted and trial.asserted and trial.report != own.report:
                moved.setdefault(trial.report, []).append(sample)
    except RuneError as err:
        error = err
    if fewest is not None:
        return Pick(fewest[1], passes=False, drawn=drawn, error=error, fewer=fewest[0])
    best = max(moved.values(), key=len)[0] if moved else None
    return Pick(best, passes=False, drawn=drawn, error=error)
