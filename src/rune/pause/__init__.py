"""The pause: the loop's state as one frozen value (:mod:`rune.pause.state`, ``PendingState``
and its one serialisation path) and the seal that makes it tamper-evident
(:mod:`rune.pause.seal`)."""
