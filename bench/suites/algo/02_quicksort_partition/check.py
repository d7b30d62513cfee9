import random
from quick import quicksort
rng = random.Random(7)
for _ in range(300):
    items = [rng.randrange(20) for _ in range(rng.randrange(15))]
    assert quicksort(list(items)) == sorted(items), items
