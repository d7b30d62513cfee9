def encode(text):
    """Run-length encode a string of letters: each run of one repeated character becomes the
    run's length followed by the character, "aaabcc" -> "3a1b2c". "" -> ""."""
    raise NotImplementedError


def decode(code):
    """The inverse of ``encode``: "3a1b2c" -> "aaabcc". A count may have several digits
    ("12x"). Raise ValueError for a string ``encode`` could not have produced, such as a count
    without a character ("3"), a character without a count ("a3b") or a count of 0."""
    raise NotImplementedError
