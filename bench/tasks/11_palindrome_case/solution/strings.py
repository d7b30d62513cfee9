def is_palindrome(word):
    """True if word reads the same backwards, ignoring case."""
    word = word.lower()
    return word == word[::-1]


def initials(name):
    """'Ada Lovelace' -> 'AL'."""
    return "".join(part[0].upper() for part in name.split())
