def partition(items, lo, hi):
    """Lomuto partition of items[lo..hi] (both ends included) around the pivot items[hi].

    Afterwards every item left of the returned index is smaller than the pivot, the pivot is at
    the returned index, and every item right of it is at least the pivot.
    """
    pivot = items[hi]
    i = lo
    for j in range(lo + 1, hi):
        if items[j] < pivot:
            items[i], items[j] = items[j], items[i]
            i += 1
    items[i], items[hi] = items[hi], items[i]
    return i


def quicksort(items, lo=0, hi=None):
    """Sort the list ``items`` in place, ascending, and return it."""
    if hi is None:
        hi = len(items) - 1
    if lo < hi:
        p = partition(items, lo, hi)
        quicksort(items, lo, p - 1)
        quicksort(items, p + 1, hi)
    return items
