def prefix_function(pattern):
    """pi[i] = the length of the longest proper prefix of pattern[:i + 1] that is also its suffix."""
    pi = [0] * len(pattern)
    k = 0
    for i in range(1, len(pattern)):
        while k > 0 and pattern[k] != pattern[i]:
            k = pi[k - 1]
        if pattern[k] == pattern[i]:
            k += 1
        pi[i] = k
    return pi


def find_all(text, pattern):
    """Start indexes of every occurrence of the non-empty ``pattern`` in ``text``, overlapping
    ones included, ascending (Knuth-Morris-Pratt)."""
    pi = prefix_function(pattern)
    found = []
    k = 0
    for i, ch in enumerate(text):
        while k > 0 and pattern[k] != ch:
            k = pi[k - 1]
        if pattern[k] == ch:
            k += 1
        if k == len(pattern):
            found.append(i - len(pattern) + 1)
            k = pi[k - 1]
    return found
