import datetime


def month_grid(year, month):
    """The weeks of a month as a calendar shows them, weeks starting on Monday: a list of
    weeks, each a list of 7 day numbers, with 0 for the days of the first and last week that
    belong to the month before or after. Only ``datetime`` may be used (not ``calendar``).

    month_grid(2024, 2)[0] == [0, 0, 0, 1, 2, 3, 4]  (1 February 2024 was a Thursday)
    """
    first = datetime.date(year, month, 1)
    following = datetime.date(year + month // 12, month % 12 + 1, 1)
    days = (following - first).days
    cells = [0] * first.weekday() + list(range(1, days + 1))
    cells += [0] * (-len(cells) % 7)
    return [cells[i : i + 7] for i in range(0, len(cells), 7)]
