def luhn_valid(number):
    """True if the string ``number`` (digits, with optional spaces or hyphens between them)
    passes the Luhn checksum: from the rightmost digit, double every second digit (subtract 9
    when that gives more than 9) and sum all digits; the sum must be a multiple of 10. Strings
    with fewer than 2 digits, or with other characters, are not valid."""
    digits = number.replace(" ", "").replace("-", "")
    if len(digits) < 2 or not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return total % 10 == 0


def card_brand(number):
    """"visa" (starts with 4, 13 or 16 digits), "mastercard" (starts with 51-55, 16 digits),
    "amex" (starts with 34 or 37, 15 digits) or None, for a Luhn-valid ``number`` (same
    format as ``luhn_valid``); None for an invalid one."""
    if not luhn_valid(number):
        return None
    digits = number.replace(" ", "").replace("-", "")
    if digits[0] == "4" and len(digits) in (13, 16):
        return "visa"
    if digits[:2] in ("51", "52", "53", "54", "55") and len(digits) == 16:
        return "mastercard"
    if digits[:2] in ("34", "37") and len(digits) == 15:
        return "amex"
    return None
