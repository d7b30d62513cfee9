from powmod import power_mod
for b in range(-5, 12):
    for e in range(0, 20):
        for m in (1, 2, 7, 10, 97):
            assert power_mod(b, e, m) == pow(b, e, m), (b, e, m)
