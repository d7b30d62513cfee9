def lower_bound(items, target):
    """Return the first index i such that items[i] >= target in the sorted list ``items``.

    If every item is smaller than ``target``, return len(items). ``items`` may hold repeated
    values: for [1, 2, 2, 2, 3] and target 2 the answer is 1.
    """
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        if items[mid] <= target:
            lo = mid + 1
        else:
            hi = mid
    return lo
