import unittest

from calculator import evaluate


class EvaluateTest(unittest.TestCase):
    def test_precedence(self):
        self.assertEqual(evaluate("2 + 3 * 4"), 14)
        self.assertEqual(evaluate("(2 + 3) * 4"), 20)
        self.assertEqual(evaluate("10 - 4 - 3"), 3)
        self.assertEqual(evaluate("8 / 4 / 2"), 1)

    def test_division_is_exact(self):
        self.assertEqual(evaluate("7/2"), 3.5)

    def test_unary_minus(self):
        self.assertEqual(evaluate("-(2+3)"), -5)
        self.assertEqual(evaluate("-4 * 2"), -8)
        self.assertEqual(evaluate("3 * (-2 + 10)"), 24)

    def test_nesting_and_spaces(self):
        self.assertEqual(evaluate(" ((1+2) * (3 + 4)) - 12 / (1 + 2) "), 17)
        self.assertEqual(evaluate("42"), 42)

    def test_division_by_zero(self):
        with self.assertRaises(ZeroDivisionError):
            evaluate("1 / (2 - 2)")

    def test_malformed(self):
        for bad in ["", "1 +", "(1 + 2", "1 2", "2 * * 3", "1 + 2)", "a + 1", "()"]:
            with self.assertRaises(ValueError, msg=bad):
                evaluate(bad)


if __name__ == "__main__":
    unittest.main()
