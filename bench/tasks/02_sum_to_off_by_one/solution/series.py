def sum_to(n):
    """Return 1 + 2 + ... + n."""
    total = 0
    for i in range(1, n + 1):
        total += i
    return total


def squares(n):
    """Return [1, 4, 9, ..., n*n]."""
    return [i * i for i in range(1, n + 1)]
