def parse_query(query):
    """Parse a URL query string ("a=1&b=x+y&a=3", an optional leading "?" allowed) into a dict
    mapping each name to the list of its values, in order, without urllib.

    "+" stands for a space, and "%XX" (two hex digits) for the byte XX; the bytes of a name or
    value are decoded as UTF-8. A pair without "=" has the value "". Empty pairs ("a=1&&b=2")
    are skipped. Raise ValueError for a "%" not followed by two hex digits.
    """
    raise NotImplementedError
