def free_slots(busy, day_start="09:00", day_end="17:00", minimum=30):
    """The free periods of a working day, given the busy ones.

    Times are "HH:MM" strings (24-hour clock, no time zone). ``busy`` is a list of
    (start, end) pairs in any order; they may overlap each other and may reach outside the
    day. Return the free (start, end) pairs within [day_start, day_end], in order, that last
    at least ``minimum`` minutes, as "HH:MM" strings.
    """
    raise NotImplementedError
