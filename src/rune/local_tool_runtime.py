"""``LocalToolRuntime``: the capped tool loop, with Rune's small-model help.

The loop is :class:`rune.runtime.runner.Runner` (docs/loop.md); the help is the assists of
:mod:`rune.assists`. ``LocalToolRuntime`` is the runner with the standard assists, built from
its ``auto_checks`` and, when the executor can try changes (:class:`rune.tools.spec.Trials`),
the sampled repair; ``assists=`` picks another list (the composition root does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rune import events as ev
from rune.assists import standard_assists
from rune.errors import ConfigError
from rune.limits import MAX_ITERATIONS, MIN_ITERATIONS
from rune.runtime.assist import Assist
from rune.runtime.breaker import BREAKER_THRESHOLD, breaker_message, repeat_message
from rune.runtime.chat import RequestShaper, ShapedRequest
from rune.runtime.protocol import ToolProtocol
from rune.runtime.runner import PROTOCOLS, Runner
from rune.tools.spec import AutoChecks, Executor, Trials
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

    ``max_iterations`` (1–8) caps the model calls of one ``run`` including its resumes.
    ``seal_key`` seals pending states (:mod:`rune.seal`); by default it is the per-user key in
    Rune's data directory, created on the first pause. ``auto_checks``: the tests a request
    names, which the loop runs itself (:mod:`rune.assists.tests`). ``assists``: the help to run
    instead of the standard list (then without ``auto_checks``).
    """

    def __init__(
        self,
        transport: Transport,
        executor: Executor,
        *,
        model: str,
        max_iterations: int = MAX_ITERATIONS,
        think: bool | None = None,
        options: Mapping[str, Any] | None = None,
        shaper: RequestShaper | None = None,
        on_event: ev.EventSink | None = None,
        protocol: str | ToolProtocol = "auto",
        seal_key: bytes | None = None,
        auto_checks: AutoChecks | None = None,
        assists: Sequence[Assist] | None = None,
    ) -> None:
        if assists is None:
            trials = executor if isinstance(executor, Trials) else None
            assists = standard_assists(auto_checks=auto_checks, trials=trials)
        elif auto_checks is not None:
            raise ConfigError("give auto_checks to the tests assist, not beside a list of assists")
        super().__init__(
            transport,
            executor,
            model=model,
            max_iterations=max_iterations,
            think=think,
            options=options,
            shaper=shaper,
            on_event=on_event,
            protocol=protocol,
            seal_key=seal_key,
            assists=assists,
        )
