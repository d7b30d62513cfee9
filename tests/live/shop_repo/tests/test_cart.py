import unittest

from shop.cart import Cart


class CartTest(unittest.TestCase):
    def test_same_item_adds_up(self):
        cart = Cart()
        cart.add("pen", 150)
        cart.add("pen", 150, 2)
        self.assertEqual(len(cart.lines), 1)
        self.assertEqual(cart.subtotal(), 450)

    def test_total_with_discount_and_tax(self):
        cart = Cart(tax_rate=10, discount_percent=20)
        cart.add("book", 2000)
        self.assertEqual(cart.total(), 1760)
