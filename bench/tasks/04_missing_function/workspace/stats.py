def mean(values):
    return sum(values) / len(values)


def count_even(values):
    """How many of the values are even."""
    return sum(1 for v in values if is_even(v))
