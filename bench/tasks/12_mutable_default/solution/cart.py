def add_item(item, cart=None):
    """Add item to cart (a new cart when none is given) and return the cart."""
    if cart is None:
        cart = []
    cart.append(item)
    return cart


def total(cart, prices):
    return sum(prices[item] for item in cart)
