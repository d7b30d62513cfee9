def to_roman(number):
    """The Roman numeral of an int from 1 to 3999 ("MCMXCIV" for 1994), in the usual
    subtractive form (IV, IX, XL, XC, CD, CM). Raise ValueError outside 1..3999."""
    raise NotImplementedError


def from_roman(text):
    """The int that a Roman numeral stands for, upper or lower case. Raise ValueError for a
    string that ``to_roman`` would not produce for any number (like "IIII", "VX" or "")."""
    raise NotImplementedError
