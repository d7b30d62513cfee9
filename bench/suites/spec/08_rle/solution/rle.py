def encode(text):
    """Run-length encode a string of letters: each run of one repeated character becomes the
    run's length followed by the character, "aaabcc" -> "3a1b2c". "" -> ""."""
    out = []
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and text[j] == text[i]:
            j += 1
        out.append(f"{j - i}{text[i]}")
        i = j
    return "".join(out)


def decode(code):
    """The inverse of ``encode``: "3a1b2c" -> "aaabcc". A count may have several digits
    ("12x"). Raise ValueError for a string ``encode`` could not have produced, such as a count
    without a character ("3"), a character without a count ("a3b") or a count of 0."""
    out, digits = [], ""
    for ch in code:
        if ch.isdigit():
            digits += ch
        elif digits and int(digits) > 0:
            out.append(ch * int(digits))
            digits = ""
        else:
            raise ValueError(code)
    if digits:
        raise ValueError(code)
    return "".join(out)
