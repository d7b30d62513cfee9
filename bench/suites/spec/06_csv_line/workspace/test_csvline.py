import unittest

from csvline import split_csv_line


class SplitCsvLineTest(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(split_csv_line("a,b,c"), ["a", "b", "c"])
        self.assertEqual(split_csv_line("a,,c,"), ["a", "", "c", ""])
        self.assertEqual(split_csv_line(""), [""])

    def test_quoted(self):
        self.assertEqual(split_csv_line('a,"b,c",d'), ["a", "b,c", "d"])
        self.assertEqual(split_csv_line('"say ""hi""",x'), ['say "hi"', "x"])
        self.assertEqual(split_csv_line('""'), [""])

    def test_other_separator(self):
        self.assertEqual(split_csv_line('1;"2;3";4', sep=";"), ["1", "2;3", "4"])
        self.assertEqual(split_csv_line("1,2;3", sep=";"), ["1,2", "3"])

    def test_unclosed(self):
        with self.assertRaises(ValueError):
            split_csv_line('a,"b')


if __name__ == "__main__":
    unittest.main()
