import unittest

from rle import decode, encode


class RunLengthTest(unittest.TestCase):
    def test_encode(self):
        self.assertEqual(encode("aaabcc"), "3a1b2c")
        self.assertEqual(encode(""), "")
        self.assertEqual(encode("x" * 12), "12x")
        self.assertEqual(encode("abab"), "1a1b1a1b")

    def test_decode(self):
        self.assertEqual(decode("3a1b2c"), "aaabcc")
        self.assertEqual(decode("12x"), "x" * 12)
        self.assertEqual(decode(""), "")

    def test_round_trip(self):
        for text in ["a", "zzzzzzzzzzzzzzzzzzzzy", "hello", "aabbbcccc"]:
            self.assertEqual(decode(encode(text)), text)

    def test_decode_rejects(self):
        for bad in ["3", "a3b", "0a", "3a4"]:
            with self.assertRaises(ValueError, msg=bad):
                decode(bad)


if __name__ == "__main__":
    unittest.main()
