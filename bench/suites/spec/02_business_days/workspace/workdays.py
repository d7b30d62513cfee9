import datetime


def add_business_days(start, days, holidays=()):
    """Return the date ``days`` business days after the ``datetime.date`` ``start``.

    Business days are Monday to Friday, except the dates in ``holidays``. Counting starts the
    day after ``start`` (``start`` itself may be any day). ``days`` may be 0: then ``start`` is
    returned if it is a business day, else the next business day. A negative ``days`` counts
    backwards the same way (the result is before ``start``).
    """
    raise NotImplementedError
