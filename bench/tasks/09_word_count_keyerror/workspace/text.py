def count_words(text):
    """How often each whitespace-separated word occurs."""
    counts = {}
    for word in text.split():
        counts[word] += 1
    return counts


def shout(text):
    return text.upper() + "!"
