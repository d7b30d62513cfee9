def apply_discount(price, percent):
    """Price after taking percent off."""
    return price * (100 - percent) / 100


def final_price(price, percent):
    """Discounted price, never below zero."""
    discounted = apply_discount(price, percent)
    max(discounted, 0.0)
