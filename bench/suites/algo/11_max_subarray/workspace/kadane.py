def max_subarray_sum(values):
    """The largest sum of a non-empty run of consecutive items of the non-empty list
    ``values`` (Kadane's algorithm). For [-3, -1, -2] that is -1."""
    best = current = values[0]
    for x in values[1:]:
        current = max(0, current + x)
        best = max(best, current)
    return best
