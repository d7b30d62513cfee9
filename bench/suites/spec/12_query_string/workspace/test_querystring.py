import unittest

from querystring import parse_query


class ParseQueryTest(unittest.TestCase):
    def test_repeated_names(self):
        self.assertEqual(parse_query("a=1&b=2&a=3"), {"a": ["1", "3"], "b": ["2"]})

    def test_leading_question_mark_and_empty_pairs(self):
        self.assertEqual(parse_query("?a=1&&b=2&"), {"a": ["1"], "b": ["2"]})
        self.assertEqual(parse_query(""), {})

    def test_decoding(self):
        self.assertEqual(parse_query("q=x+y%21&name=J%C3%BCrgen"), {"q": ["x y!"], "name": ["Jürgen"]})
        self.assertEqual(parse_query("a%20b=c%3Dd"), {"a b": ["c=d"]})

    def test_without_value(self):
        self.assertEqual(parse_query("flag&x="), {"flag": [""], "x": [""]})

    def test_bad_percent(self):
        for bad in ["a=%", "a=%4", "a=%zz", "%g1=2"]:
            with self.assertRaises(ValueError, msg=bad):
                parse_query(bad)


if __name__ == "__main__":
    unittest.main()
