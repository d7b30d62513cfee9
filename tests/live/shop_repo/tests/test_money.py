import unittest

from shop.money import format_cents, to_cents


class ToCentsTest(unittest.TestCase):
    def test_amounts(self):
        self.assertEqual(to_cents("12.34"), 1234)
        self.assertEqual(to_cents("12.3"), 1230)
        self.assertEqual(to_cents("12"), 1200)
        self.assertEqual(to_cents("-0.50"), -50)

    def test_rejects(self):
        for bad in ["", "1.234", "abc", "1,50"]:
            with self.assertRaises(ValueError):
                to_cents(bad)


class FormatCentsTest(unittest.TestCase):
    def test_format(self):
        self.assertEqual(format_cents(1234), "12.34")
        self.assertEqual(format_cents(5), "0.05")
        self.assertEqual(format_cents(-50), "-0.50")
