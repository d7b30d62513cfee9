"""``LocalToolRuntime``: the capped tool loop, with Rune's small-model help.

The loop is :class:`rune.runtime.runner.Runner` (docs/loop.md); the help is the assists of
:mod:`rune.assists`. ``LocalToolRuntime`` is the runner with the standard assists, built from
its ``auto_checks`` (the sampled repair tries changes with the executor, when it can:
:class:`rune.tools.spec.Trials`); ``assists=`` picks another list (the composition root does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from rune.assists import standard_assists
from rune.errors import ConfigError
from rune.limits import MAX_ITERATIONS, MIN_ITERATIONS
from rune.runtime.assist import Assist
from rune.runtime.breaker import BREAKER_THRESHOLD, breaker_message, repeat_message
from rune.runtime.chat import RequestShaper, ShapedRequest
from rune.runtime.runner import PROTOCOLS, Runner
from rune.runtime.settings import RunnerSettings
from rune.tools.spec import AutoChecks, Executor
from rune.transport.base import Transport

__all__ = [
    "BREAKER_THRESHOLD",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "PROTOCOLS",
    "LocalToolRuntime",
    "RequestShaper",
    "ShapedRequest",
    "breaker_message",
    "repeat_message",
]


class LocalToolRuntime(Runner):
    """Drives one model through tool calls until it answers, pauses, or must stop.

    The settings are :class:`Runner`'s (``model``, ``max_iterations`` 1–8, ``protocol``,
    ``seal_key``...). ``auto_checks``: the tests a request
    names, which the loop runs itself (:mod:`rune.assists.tests`). ``assists``: the help to run
    instead of the standard list (then without ``auto_checks``).
    """

    def __init__(
        self,
        transport: Transport,
        executor: Executor,
        *,
        auto_checks: AutoChecks | None = None,
        assists: Sequence[Assist] | None = None,
        **settings: Unpack[RunnerSettings],
    ) -> None:
        if assists is None:
            assists = standard_assists(auto_checks=auto_checks)
        elif auto_checks is not None:
            raise ConfigError("give auto_checks to the tests assist, not beside a list of assists")
        super().__init__(transport, executor, assists=assists, **settings)
