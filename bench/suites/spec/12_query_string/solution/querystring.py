def parse_query(query):
    """Parse a URL query string ("a=1&b=x+y&a=3", an optional leading "?" allowed) into a dict
    mapping each name to the list of its values, in order, without urllib.

    "+" stands for a space, and "%XX" (two hex digits) for the byte XX; the bytes of a name or
    value are decoded as UTF-8. A pair without "=" has the value "". Empty pairs ("a=1&&b=2")
    are skipped. Raise ValueError for a "%" not followed by two hex digits.
    """
    def unquote(text):
        raw = bytearray()
        i = 0
        while i < len(text):
            ch = text[i]
            if ch == "%":
                pair = text[i + 1 : i + 3]
                if len(pair) != 2 or any(c not in "0123456789abcdefABCDEF" for c in pair):
                    raise ValueError(text)
                raw.append(int(pair, 16))
                i += 3
                continue
            raw.extend(b" " if ch == "+" else ch.encode("utf-8"))
            i += 1
        return raw.decode("utf-8")

    result = {}
    for pair in query.removeprefix("?").split("&"):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        result.setdefault(unquote(name), []).append(unquote(value))
    return result
