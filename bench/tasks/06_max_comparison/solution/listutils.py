def largest(items):
    """Return the largest item of a non-empty list."""
    best = items[0]
    for item in items[1:]:
        if item > best:
            best = item
    return best


def first_index(items, value):
    """Index of the first occurrence of value, or -1."""
    for i, item in enumerate(items):
        if item == value:
            return i
    return -1
