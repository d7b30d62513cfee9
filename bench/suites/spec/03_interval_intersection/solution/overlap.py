def intersect(first, second):
    """The intersection of two lists of half-open intervals ``(start, end)`` (start < end).

    Each list is sorted and its intervals do not overlap each other. Return the sorted list
    of the non-empty intervals covered by both lists, as tuples; intervals that only touch
    (``(1, 3)`` and ``(3, 5)``) do not intersect. Adjacent pieces of the result are not merged.
    """
    i = j = 0
    out = []
    while i < len(first) and j < len(second):
        start = max(first[i][0], second[j][0])
        end = min(first[i][1], second[j][1])
        if start < end:
            out.append((start, end))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return out
