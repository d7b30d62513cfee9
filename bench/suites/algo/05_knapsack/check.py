import itertools, random
from knapsack import best_value

def brute(items, cap):
    best = 0
    for n in range(len(items) + 1):
        for pick in itertools.combinations(items, n):
            if sum(w for w, _ in pick) <= cap:
                best = max(best, sum(v for _, v in pick))
    return best

assert best_value([(1, 10)], 5) == 10
rng = random.Random(2)
for _ in range(200):
    items = [(rng.randrange(1, 6), rng.randrange(1, 20)) for _ in range(rng.randrange(6))]
    cap = rng.randrange(12)
    assert best_value(items, cap) == brute(items, cap), (items, cap)
