class Turnstile:
    """A coin-operated turnstile, a state machine with the states "locked" and "unlocked".

    It starts locked. ``coin()`` in the locked state unlocks it; in the unlocked state the coin
    is kept as a refund (``refunds`` counts them). ``push()`` in the unlocked state lets one
    person through (``passed`` counts them) and locks it again; in the locked state it raises
    ``RuntimeError`` and changes nothing. ``state`` is "locked" or "unlocked". ``history`` is
    the list of the events handled so far ("coin" or "push"), a refused push included.
    """

    def __init__(self):
        raise NotImplementedError

    def coin(self):
        raise NotImplementedError

    def push(self):
        raise NotImplementedError
