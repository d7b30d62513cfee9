import unittest

from roman import from_roman, to_roman


class RomanTest(unittest.TestCase):
    def test_to_roman(self):
        for n, text in [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV"), (40, "XL"), (90, "XC"),
                        (400, "CD"), (1994, "MCMXCIV"), (2024, "MMXXIV"), (3999, "MMMCMXCIX")]:
            self.assertEqual(to_roman(n), text)

    def test_to_roman_range(self):
        for bad in (0, -1, 4000):
            with self.assertRaises(ValueError):
                to_roman(bad)

    def test_from_roman(self):
        self.assertEqual(from_roman("MCMXCIV"), 1994)
        self.assertEqual(from_roman("xiv"), 14)

    def test_round_trip(self):
        for n in range(1, 4000):
            self.assertEqual(from_roman(to_roman(n)), n)

    def test_from_roman_rejects(self):
        for bad in ["", "IIII", "VX", "IC", "ABC", "MMMM", "XXXX"]:
            with self.assertRaises(ValueError, msg=bad):
                from_roman(bad)


if __name__ == "__main__":
    unittest.main()
