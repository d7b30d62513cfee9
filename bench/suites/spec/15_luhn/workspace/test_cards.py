import unittest

from cards import card_brand, luhn_valid


class LuhnTest(unittest.TestCase):
    def test_valid(self):
        for number in ["4539 1488 0343 6467", "79927398713", "0000 0000", "18"]:
            self.assertTrue(luhn_valid(number), number)

    def test_invalid(self):
        for number in ["4539 1488 0343 6468", "79927398710", "0", "", "12a4", "1234 5678 9012 3456"]:
            self.assertFalse(luhn_valid(number), number)

    def test_separators(self):
        self.assertTrue(luhn_valid("4539-1488-0343-6467"))

    def test_brands(self):
        self.assertEqual(card_brand("4539 1488 0343 6467"), "visa")
        self.assertEqual(card_brand("5555 5555 5555 4444"), "mastercard")
        self.assertEqual(card_brand("3782 822463 10005"), "amex")
        self.assertIsNone(card_brand("79927398713"))
        self.assertIsNone(card_brand("4539 1488 0343 6468"))


if __name__ == "__main__":
    unittest.main()
