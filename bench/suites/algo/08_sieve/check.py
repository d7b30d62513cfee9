from primes import primes_up_to

def slow(n):
    return [k for k in range(2, n + 1) if all(k % d for d in range(2, k))]

for n in range(0, 130):
    assert primes_up_to(n) == slow(n), n
