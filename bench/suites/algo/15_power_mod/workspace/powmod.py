def power_mod(base, exponent, modulus):
    """base ** exponent % modulus for integers exponent >= 0 and modulus >= 1, by repeated
    squaring (as Python's pow(base, exponent, modulus))."""
    result = 1 % modulus
    base %= modulus
    while exponent > 0:
        if exponent % 2 == 0:
            result = result * base % modulus
        base = base * base % modulus
        exponent //= 2
    return result
