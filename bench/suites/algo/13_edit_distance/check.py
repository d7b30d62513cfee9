import functools
from levenshtein import edit_distance

def slow(a, b):
    @functools.lru_cache(None)
    def d(i, j):
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))
    return d(len(a), len(b))

for a, b in [("kitten", "sitting"), ("", "abc"), ("abc", ""), ("flaw", "lawn"), ("ab", "ba"), ("xyz", "abc"), ("abcd", "d")]:
    assert edit_distance(a, b) == slow(a, b), (a, b)
