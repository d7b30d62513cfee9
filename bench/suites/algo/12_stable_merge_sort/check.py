import random
from mergesort import merge_sort
rng = random.Random(8)
for _ in range(300):
    items = [(rng.randrange(4), i) for i in range(rng.randrange(12))]
    assert merge_sort(items, key=lambda p: p[0]) == sorted(items, key=lambda p: p[0]), items
