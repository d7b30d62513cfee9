import unittest

from spiral import spiral_order


class SpiralOrderTest(unittest.TestCase):
    def test_square(self):
        self.assertEqual(spiral_order([[1, 2, 3], [4, 5, 6], [7, 8, 9]]), [1, 2, 3, 6, 9, 8, 7, 4, 5])

    def test_wide(self):
        self.assertEqual(
            spiral_order([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]),
            [1, 2, 3, 4, 8, 12, 11, 10, 9, 5, 6, 7],
        )

    def test_tall(self):
        self.assertEqual(spiral_order([[1, 2], [3, 4], [5, 6], [7, 8]]), [1, 2, 4, 6, 8, 7, 5, 3])

    def test_single_row_and_column(self):
        self.assertEqual(spiral_order([[1, 2, 3]]), [1, 2, 3])
        self.assertEqual(spiral_order([[1], [2], [3]]), [1, 2, 3])
        self.assertEqual(spiral_order([[7]]), [7])

    def test_empty(self):
        self.assertEqual(spiral_order([]), [])
        self.assertEqual(spiral_order([[], []]), [])

    def test_every_item_once(self):
        m = [[r * 10 + c for c in range(6)] for r in range(5)]
        got = spiral_order(m)
        self.assertEqual(sorted(got), sorted(x for row in m for x in row))
        self.assertEqual(got[:6], m[0])


if __name__ == "__main__":
    unittest.main()
