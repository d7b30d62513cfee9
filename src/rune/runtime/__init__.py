"""The loop: :class:`~rune.runtime.runner.Runner` and its seams.

- :mod:`rune.runtime.runner`: run / approve / reject, the model calls, the turn;
- :mod:`rune.runtime.calls`: answering a turn's calls (dedup, cap, pause);
- :mod:`rune.runtime.breaker`: the circuit breaker;
- :mod:`rune.runtime.protocol` and :mod:`rune.runtime.protocols`: a ``ToolProtocol`` strategy
  per protocol (native, text fallback, constrained);
- :mod:`rune.runtime.chat`: one model call as a value, and the shaper that fits it;
- :mod:`rune.runtime.assist`: the hooks small-model help plugs into (:mod:`rune.assists`);
- :mod:`rune.runtime.endings`: the responses a run ends with;
- :mod:`rune.runtime.settings`: what a runner is built with, and its check.

``rune.LocalToolRuntime`` is the runner with the standard assists.
"""
