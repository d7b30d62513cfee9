import math


def distance(p, q):
    """Euclidean distance between two points (x, y)."""
    dx = p[0] - q[0]
    dy = p[1] - q[1]
    return math.sqroot(dx * dx + dy * dy)


def perimeter(points):
    """Length of the closed polygon through points."""
    total = 0.0
    for i, p in enumerate(points):
        total += distance(p, points[(i + 1) % len(points)])
    return total
