import unittest

from monthgrid import month_grid


class MonthGridTest(unittest.TestCase):
    def test_february_2024(self):
        self.assertEqual(
            month_grid(2024, 2),
            [
                [0, 0, 0, 1, 2, 3, 4],
                [5, 6, 7, 8, 9, 10, 11],
                [12, 13, 14, 15, 16, 17, 18],
                [19, 20, 21, 22, 23, 24, 25],
                [26, 27, 28, 29, 0, 0, 0],
            ],
        )

    def test_starts_on_monday(self):
        grid = month_grid(2024, 1)
        self.assertEqual(grid[0], [1, 2, 3, 4, 5, 6, 7])
        self.assertEqual(grid[-1], [29, 30, 31, 0, 0, 0, 0])

    def test_december(self):
        grid = month_grid(2023, 12)
        self.assertEqual(grid[0], [0, 0, 0, 0, 1, 2, 3])
        self.assertEqual(grid[-1], [25, 26, 27, 28, 29, 30, 31])

    def test_february_in_four_weeks(self):
        self.assertEqual(len(month_grid(2021, 2)), 4)
        self.assertEqual(month_grid(2021, 2)[-1], [22, 23, 24, 25, 26, 27, 28])

    def test_every_day_once(self):
        for month in range(1, 13):
            days = [d for week in month_grid(2023, month) for d in week if d]
            self.assertEqual(days, list(range(1, len(days) + 1)))
            self.assertTrue(all(len(w) == 7 for w in month_grid(2023, month)))


if __name__ == "__main__":
    unittest.main()
