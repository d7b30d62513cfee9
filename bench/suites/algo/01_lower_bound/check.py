import bisect, random
from search import lower_bound
rng = random.Random(5)
for _ in range(300):
    items = sorted(rng.randrange(10) for _ in range(rng.randrange(12)))
    t = rng.randrange(-1, 11)
    assert lower_bound(items, t) == bisect.bisect_left(items, t), (items, t)
