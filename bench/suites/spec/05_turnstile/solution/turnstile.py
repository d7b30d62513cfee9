class Turnstile:
    """A coin-operated turnstile, a state machine with the states "locked" and "unlocked".

    It starts locked. ``coin()`` in the locked state unlocks it; in the unlocked state the coin
    is kept as a refund (``refunds`` counts them). ``push()`` in the unlocked state lets one
    person through (``passed`` counts them) and locks it again; in the locked state it raises
    ``RuntimeError`` and changes nothing. ``state`` is "locked" or "unlocked". ``history`` is
    the list of the events handled so far ("coin" or "push"), a refused push included.
    """

    def __init__(self):
        self.state = "locked"
        self.passed = 0
        self.refunds = 0
        self.history = []

    def coin(self):
        self.history.append("coin")
        if self.state == "locked":
            self.state = "unlocked"
        else:
            self.refunds += 1

    def push(self):
        self.history.append("push")
        if self.state == "locked":
            raise RuntimeError("the turnstile is locked")
        self.passed += 1
        self.state = "locked"
