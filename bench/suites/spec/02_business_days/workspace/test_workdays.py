import datetime
import unittest

from workdays import add_business_days

D = datetime.date


class AddBusinessDaysTest(unittest.TestCase):
    def test_within_a_week(self):
        self.assertEqual(add_business_days(D(2024, 3, 4), 3), D(2024, 3, 7))  # Mon -> Thu

    def test_over_a_weekend(self):
        self.assertEqual(add_business_days(D(2024, 3, 8), 1), D(2024, 3, 11))  # Fri -> Mon
        self.assertEqual(add_business_days(D(2024, 3, 9), 1), D(2024, 3, 11))  # Sat -> Mon
        self.assertEqual(add_business_days(D(2024, 3, 4), 10), D(2024, 3, 18))

    def test_zero(self):
        self.assertEqual(add_business_days(D(2024, 3, 6), 0), D(2024, 3, 6))
        self.assertEqual(add_business_days(D(2024, 3, 10), 0), D(2024, 3, 11))  # Sun -> Mon

    def test_holidays(self):
        holidays = [D(2024, 12, 25), D(2024, 12, 26)]
        self.assertEqual(add_business_days(D(2024, 12, 24), 1, holidays), D(2024, 12, 27))
        self.assertEqual(add_business_days(D(2024, 12, 25), 0, holidays), D(2024, 12, 27))

    def test_backwards(self):
        self.assertEqual(add_business_days(D(2024, 3, 11), -1), D(2024, 3, 8))  # Mon -> Fri
        self.assertEqual(add_business_days(D(2024, 3, 13), -7), D(2024, 3, 4))

    def test_across_a_year(self):
        self.assertEqual(add_business_days(D(2023, 12, 29), 2), D(2024, 1, 2))


if __name__ == "__main__":
    unittest.main()
