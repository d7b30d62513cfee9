import unittest

from agenda import free_slots


class FreeSlotsTest(unittest.TestCase):
    def test_empty_day(self):
        self.assertEqual(free_slots([]), [("09:00", "17:00")])

    def test_gaps(self):
        busy = [("10:00", "11:00"), ("13:30", "14:00")]
        self.assertEqual(
            free_slots(busy), [("09:00", "10:00"), ("11:00", "13:30"), ("14:00", "17:00")]
        )

    def test_unsorted_and_overlapping(self):
        busy = [("12:00", "13:00"), ("09:30", "11:00"), ("10:30", "12:15")]
        self.assertEqual(free_slots(busy), [("09:00", "09:30"), ("13:00", "17:00")])

    def test_short_gaps_dropped(self):
        busy = [("09:20", "10:00"), ("10:10", "16:45")]
        self.assertEqual(free_slots(busy), [])
        self.assertEqual(
            free_slots(busy, minimum=10), [("09:00", "09:20"), ("10:00", "10:10"), ("16:45", "17:00")]
        )

    def test_busy_outside_the_day(self):
        busy = [("07:00", "09:45"), ("16:00", "19:00")]
        self.assertEqual(free_slots(busy), [("09:45", "16:00")])
        self.assertEqual(free_slots([("18:00", "19:00")], "08:00", "12:00"), [("08:00", "12:00")])

    def test_other_day_bounds(self):
        self.assertEqual(
            free_slots([("08:30", "09:05")], day_start="08:00", day_end="10:00", minimum=15),
            [("08:00", "08:30"), ("09:05", "10:00")],
        )


if __name__ == "__main__":
    unittest.main()
