import unittest

from durations import parse_duration


class ParseDurationTest(unittest.TestCase):
    def test_single_units(self):
        self.assertEqual(parse_duration("45s"), 45)
        self.assertEqual(parse_duration("2m"), 120)
        self.assertEqual(parse_duration("3h"), 10800)
        self.assertEqual(parse_duration("1d"), 86400)

    def test_combined(self):
        self.assertEqual(parse_duration("1h30m"), 5400)
        self.assertEqual(parse_duration("2d 3h"), 2 * 86400 + 3 * 3600)
        self.assertEqual(parse_duration("1h 2m 3s"), 3723)
        self.assertEqual(parse_duration("  10m5s "), 605)

    def test_zero_parts(self):
        self.assertEqual(parse_duration("0s"), 0)
        self.assertEqual(parse_duration("0h15m"), 900)

    def test_rejects_bad_input(self):
        for bad in ["", "   ", "10", "h", "5x", "1m1h", "1h1h", "1.5h", "-3s", "1 h", "3s 4"]:
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    parse_duration(bad)


if __name__ == "__main__":
    unittest.main()
