def to_roman(number):
    """The Roman numeral of an int from 1 to 3999 ("MCMXCIV" for 1994), in the usual
    subtractive form (IV, IX, XL, XC, CD, CM). Raise ValueError outside 1..3999."""
    if not 1 <= number <= 3999:
        raise ValueError(number)
    table = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
             (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
    out = []
    for value, letters in table:
        count, number = divmod(number, value)
        out.append(letters * count)
    return "".join(out)


def from_roman(text):
    """The int that a Roman numeral stands for, upper or lower case. Raise ValueError for a
    string that ``to_roman`` would not produce for any number (like "IIII", "VX" or "")."""
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    text = text.upper()
    if not text or any(ch not in values for ch in text):
        raise ValueError(text)
    total = 0
    for i, ch in enumerate(text):
        if i + 1 < len(text) and values[ch] < values[text[i + 1]]:
            total -= values[ch]
        else:
            total += values[ch]
    if not 1 <= total <= 3999 or to_roman(total) != text:
        raise ValueError(text)
    return total
