import unittest

from shop.discounts import bulk_price, percent_off


class PercentOffTest(unittest.TestCase):
    def test_ten_percent(self):
        self.assertEqual(percent_off(1000, 10), 900)

    def test_rounds_down(self):
        self.assertEqual(percent_off(999, 10), 900)

    def test_bounds(self):
        self.assertEqual(percent_off(1000, 0), 1000)
        self.assertEqual(percent_off(1000, 100), 0)
        with self.assertRaises(ValueError):
            percent_off(1000, 101)


class BulkPriceTest(unittest.TestCase):
    def test_every_tenth_free(self):
        self.assertEqual(bulk_price(100, 9), 900)
        self.assertEqual(bulk_price(100, 10), 900)
        self.assertEqual(bulk_price(100, 25), 2300)
