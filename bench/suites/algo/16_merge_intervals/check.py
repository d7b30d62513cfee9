import random
from intervals import merge_intervals
assert merge_intervals([[1, 3], [3, 5]]) == [[1, 5]]
rng = random.Random(1)
for _ in range(300):
    iv = []
    for _ in range(rng.randrange(6)):
        s = rng.randrange(10)
        iv.append([s, s + rng.randrange(4)])
    covered = set()
    for s, e in iv:
        covered |= {x / 2 for x in range(2 * s, 2 * e + 1)}
    got = merge_intervals([list(p) for p in iv])
    assert all(got[k][1] < got[k + 1][0] for k in range(len(got) - 1)), got
    assert set().union(*({x / 2 for x in range(2 * s, 2 * e + 1)} for s, e in got)) == covered, (iv, got)
