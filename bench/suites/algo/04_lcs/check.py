import itertools, random
from lcs import lcs_length

def brute(a, b):
    for n in range(min(len(a), len(b)), -1, -1):
        subs = {c for c in itertools.combinations(a, n)}
        if any(c in subs for c in itertools.combinations(b, n)):
            return n

assert lcs_length("abcde", "ace") == 3
rng = random.Random(11)
for _ in range(200):
    a = "".join(rng.choice("abc") for _ in range(rng.randrange(7)))
    b = "".join(rng.choice("abc") for _ in range(rng.randrange(7)))
    assert lcs_length(a, b) == brute(a, b), (a, b)
