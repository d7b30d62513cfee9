import random
from kadane import max_subarray_sum
assert max_subarray_sum([-3, -1, -2]) == -1
rng = random.Random(6)
for _ in range(300):
    v = [rng.randrange(-9, 10) for _ in range(rng.randrange(1, 9))]
    want = max(sum(v[i:j]) for i in range(len(v)) for j in range(i + 1, len(v) + 1))
    assert max_subarray_sum(v) == want, v
