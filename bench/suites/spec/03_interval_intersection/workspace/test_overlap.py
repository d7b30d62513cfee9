import unittest

from overlap import intersect


class IntersectTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(intersect([(0, 5)], [(3, 8)]), [(3, 5)])

    def test_empty(self):
        self.assertEqual(intersect([], [(1, 2)]), [])
        self.assertEqual(intersect([(1, 2)], [(2, 3)]), [])

    def test_many(self):
        a = [(0, 2), (5, 10), (13, 23), (24, 25)]
        b = [(1, 5), (8, 12), (15, 24), (25, 26)]
        self.assertEqual(intersect(a, b), [(1, 2), (8, 10), (15, 23)])

    def test_one_covers_several(self):
        self.assertEqual(intersect([(0, 100)], [(1, 2), (5, 7), (99, 120)]), [(1, 2), (5, 7), (99, 100)])

    def test_against_points(self):
        import random

        rng = random.Random(12)
        for _ in range(200):
            def intervals():
                cuts = sorted(rng.sample(range(30), 2 * rng.randrange(4)))
                return [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts), 2)]

            a, b = intervals(), intervals()
            got = intersect(a, b)
            covered = {x for s, e in got for x in range(s, e)}
            want = {x for s, e in a for x in range(s, e)} & {x for s, e in b for x in range(s, e)}
            self.assertEqual(covered, want, (a, b))
            self.assertEqual(got, sorted(got))
            self.assertTrue(all(s < e for s, e in got))


if __name__ == "__main__":
    unittest.main()
