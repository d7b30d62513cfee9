import math
from numbers_gcd import extended_gcd
for a in range(40):
    for b in range(40):
        g, x, y = extended_gcd(a, b)
        assert g == math.gcd(a, b) and a * x + b * y == g, (a, b, g, x, y)
