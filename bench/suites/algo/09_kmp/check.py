import random
from kmp import find_all
rng = random.Random(4)
for _ in range(300):
    text = "".join(rng.choice("ab") for _ in range(rng.randrange(15)))
    pattern = "".join(rng.choice("ab") for _ in range(rng.randrange(1, 4)))
    want = [i for i in range(len(text) - len(pattern) + 1) if text.startswith(pattern, i)]
    assert find_all(text, pattern) == want, (text, pattern)
