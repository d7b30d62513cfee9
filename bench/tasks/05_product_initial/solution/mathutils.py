def product(numbers):
    """Multiply all the numbers together."""
    result = 1
    for n in numbers:
        result *= n
    return result


def clamp(x, low, high):
    """Limit x to the range [low, high]."""
    return max(low, min(x, high))
