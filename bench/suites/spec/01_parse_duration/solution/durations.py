def parse_duration(text):
    """Parse a duration like "1h30m", "45s", "2d 3h" or "1h 2m 3s" into a number of seconds.

    Units: d (86400 s), h (3600 s), m (60 s), s (1 s). Each part is a whole number followed
    directly by its unit; parts may be separated by spaces, units come in the order d, h, m, s
    and each at most once. Leading and trailing spaces are ignored. Raise ValueError for
    anything else, including an empty string.
    """
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    order = "dhms"
    total, last, number, seen_part = 0, -1, "", False
    for ch in text.strip():
        if ch.isdigit():
            number += ch
        elif ch in units:
            if not number or order.index(ch) <= last:
                raise ValueError(text)
            total += int(number) * units[ch]
            last, number, seen_part = order.index(ch), "", True
        elif ch == " " and not number:
            continue
        else:
            raise ValueError(text)
    if number or not seen_part:
        raise ValueError(text)
    return total
