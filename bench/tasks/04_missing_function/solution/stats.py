def mean(values):
    return sum(values) / len(values)


def is_even(n):
    return n % 2 == 0


def count_even(values):
    """How many of the values are even."""
    return sum(1 for v in values if is_even(v))
