"""Amounts of money as whole cents."""


def to_cents(amount: str) -> int:
    """Parse "12.34", "12.3", "12" or "-0.50" into cents."""
    text = amount.strip()
    sign = -1 if text.startswith("-") else 1
    whole, _, fraction = text.lstrip("+-").partition(".")
    if not whole.isdigit() or (fraction and not fraction.isdigit()) or len(fraction) > 2:
        raise ValueError(f"not an amount: {amount!r}")
    return sign * (int(whole) * 100 + int(fraction.ljust(2, "0") or "0"))


def format_cents(cents: int) -> str:
    """Format cents as "12.34" (negative amounts as "-0.50")."""
    sign = "-" if cents < 0 else ""
    whole, rest = divmod(abs(cents), 100)
    return f"{sign}{whole}.{rest:02d}"
