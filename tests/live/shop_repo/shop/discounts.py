"""Price reductions."""


def percent_off(cents: int, percent: int) -> int:
    """The price after taking ``percent`` percent off (the discount rounded down to a cent)."""
    if not 0 <= percent <= 100:
        raise ValueError("percent must be between 0 and 100")
    return cents - cents * percent // 100


def bulk_price(unit_cents: int, quantity: int) -> int:
    """The price of ``quantity`` units: every 10th unit is free."""
    if quantity < 0:
        raise ValueError("quantity must not be negative")
    free = quantity // 10
    return unit_cents * (quantity - free)
