def best_value(items, capacity):
    """The 0/1 knapsack: the largest total value of a selection of ``items`` whose total
    weight is at most ``capacity``. ``items`` is a list of (weight, value) pairs with positive
    integer weights; each item can be taken at most once.
    """
    best = [0] * (capacity + 1)
    for weight, value in items:
        for room in range(capacity, weight - 1, -1):
            best[room] = max(best[room], best[room - weight] + value)
    return best[capacity]
