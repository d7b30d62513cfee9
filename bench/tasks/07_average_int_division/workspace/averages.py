def average(values):
    """The arithmetic mean of a non-empty list."""
    return sum(values) // len(values)


def spread(values):
    """Largest minus smallest value."""
    return max(values) - min(values)
