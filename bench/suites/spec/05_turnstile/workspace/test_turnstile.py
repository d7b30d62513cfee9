import unittest

from turnstile import Turnstile


class TurnstileTest(unittest.TestCase):
    def test_starts_locked(self):
        t = Turnstile()
        self.assertEqual((t.state, t.passed, t.refunds, t.history), ("locked", 0, 0, []))

    def test_coin_then_push(self):
        t = Turnstile()
        t.coin()
        self.assertEqual(t.state, "unlocked")
        t.push()
        self.assertEqual((t.state, t.passed), ("locked", 1))

    def test_push_when_locked(self):
        t = Turnstile()
        with self.assertRaises(RuntimeError):
            t.push()
        self.assertEqual((t.state, t.passed, t.history), ("locked", 0, ["push"]))

    def test_second_coin_is_refunded(self):
        t = Turnstile()
        t.coin()
        t.coin()
        self.assertEqual((t.state, t.refunds), ("unlocked", 1))
        t.push()
        t.coin()
        self.assertEqual((t.state, t.passed, t.refunds), ("unlocked", 1, 1))
        self.assertEqual(t.history, ["coin", "coin", "push", "coin"])


if __name__ == "__main__":
    unittest.main()
