import unittest

from wrapping import wrap


class WrapTest(unittest.TestCase):
    def test_greedy(self):
        self.assertEqual(wrap("the quick brown fox jumps", 10), ["the quick", "brown fox", "jumps"])

    def test_exact_fit(self):
        self.assertEqual(wrap("aaa bbb", 7), ["aaa bbb"])
        self.assertEqual(wrap("aaa bbb", 6), ["aaa", "bbb"])

    def test_whitespace(self):
        self.assertEqual(wrap("  one\ttwo\n\nthree  ", 20), ["one two three"])
        self.assertEqual(wrap("   ", 5), [])

    def test_long_word(self):
        self.assertEqual(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"])
        self.assertEqual(wrap("hi abcdefgh yo", 4), ["hi", "abcd", "efgh", "yo"])
        self.assertEqual(wrap("abcdef g", 4), ["abcd", "ef g"])

    def test_lines_never_too_long(self):
        text = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod"
        for width in range(1, 30):
            lines = wrap(text, width)
            self.assertTrue(all(0 < len(line) <= width for line in lines), width)
            self.assertEqual("".join(lines).replace(" ", ""), text.replace(" ", ""))


if __name__ == "__main__":
    unittest.main()
