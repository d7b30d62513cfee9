def free_slots(busy, day_start="09:00", day_end="17:00", minimum=30):
    """The free periods of a working day, given the busy ones.

    Times are "HH:MM" strings (24-hour clock, no time zone). ``busy`` is a list of
    (start, end) pairs in any order; they may overlap each other and may reach outside the
    day. Return the free (start, end) pairs within [day_start, day_end], in order, that last
    at least ``minimum`` minutes, as "HH:MM" strings.
    """
    def minutes(text):
        hours, mins = text.split(":")
        return int(hours) * 60 + int(mins)

    def clock(value):
        return f"{value // 60:02d}:{value % 60:02d}"

    start, end = minutes(day_start), minutes(day_end)
    free, cursor = [], start
    for b_start, b_end in sorted((minutes(s), minutes(e)) for s, e in busy):
        if b_start - cursor >= minimum and cursor < end:
            free.append((cursor, min(b_start, end)))
        cursor = max(cursor, b_end)
    if end - cursor >= minimum:
        free.append((cursor, end))
    return [(clock(s), clock(e)) for s, e in free if e - s >= minimum]
