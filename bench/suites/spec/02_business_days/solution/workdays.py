import datetime


def add_business_days(start, days, holidays=()):
    """Return the date ``days`` business days after the ``datetime.date`` ``start``.

    Business days are Monday to Friday, except the dates in ``holidays``. Counting starts the
    day after ``start`` (``start`` itself may be any day). ``days`` may be 0: then ``start`` is
    returned if it is a business day, else the next business day. A negative ``days`` counts
    backwards the same way (the result is before ``start``).
    """
    step = 1 if days >= 0 else -1
    holidays = set(holidays)

    def is_business(day):
        return day.weekday() < 5 and day not in holidays

    current = start
    if days == 0:
        while not is_business(current):
            current += datetime.timedelta(days=1)
        return current
    remaining = abs(days)
    while remaining:
        current += datetime.timedelta(days=step)
        if is_business(current):
            remaining -= 1
    return current
