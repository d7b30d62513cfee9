def intersect(first, second):
    """The intersection of two lists of half-open intervals ``(start, end)`` (start < end).

    Each list is sorted and its intervals do not overlap each other. Return the sorted list
    of the non-empty intervals covered by both lists, as tuples; intervals that only touch
    (``(1, 3)`` and ``(3, 5)``) do not intersect. Adjacent pieces of the result are not merged.
    """
    raise NotImplementedError
