"""Sales tax."""


def tax_cents(cents: int, rate_percent: float) -> int:
    """The tax on ``cents`` at ``rate_percent``, rounded half up to a whole cent."""
    exact = cents * rate_percent / 100
    return int(exact + 0.5)
