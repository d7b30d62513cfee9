import random
from dsu import DisjointSets
rng = random.Random(9)
for _ in range(100):
    n = 8
    sets = DisjointSets(n)
    groups = [{i} for i in range(n)]
    for _ in range(10):
        a, b = rng.randrange(n), rng.randrange(n)
        ga = next(g for g in groups if a in g)
        gb = next(g for g in groups if b in g)
        assert sets.union(a, b) == (ga is not gb), (a, b)
        if ga is not gb:
            groups.remove(gb)
            ga |= gb
        for x in range(n):
            for y in range(n):
                same = any(x in g and y in g for g in groups)
                assert sets.connected(x, y) == same, (x, y)
