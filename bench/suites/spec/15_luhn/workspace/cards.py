def luhn_valid(number):
    """True if the string ``number`` (digits, with optional spaces or hyphens between them)
    passes the Luhn checksum: from the rightmost digit, double every second digit (subtract 9
    when that gives more than 9) and sum all digits; the sum must be a multiple of 10. Strings
    with fewer than 2 digits, or with other characters, are not valid."""
    raise NotImplementedError


def card_brand(number):
    """"visa" (starts with 4, 13 or 16 digits), "mastercard" (starts with 51-55, 16 digits),
    "amex" (starts with 34 or 37, 15 digits) or None, for a Luhn-valid ``number`` (same
    format as ``luhn_valid``); None for an invalid one."""
    raise NotImplementedError
