def parse_duration(text):
    """Parse a duration like "1h30m", "45s", "2d 3h" or "1h 2m 3s" into a number of seconds.

    Units: d (86400 s), h (3600 s), m (60 s), s (1 s). Each part is a whole number followed
    directly by its unit; parts may be separated by spaces, units come in the order d, h, m, s
    and each at most once. Leading and trailing spaces are ignored. Raise ValueError for
    anything else, including an empty string.
    """
    raise NotImplementedError
