def extended_gcd(a, b):
    """Return (g, x, y) with g = gcd(a, b) and a*x + b*y == g, for integers a, b >= 0."""
    if b == 0:
        return a, 1, 0
    g, x, y = extended_gcd(b, a % b)
    return g, y, x - (a // b) * y
