def wrap(text, width):
    """Break ``text`` into lines of at most ``width`` characters, greedily: as many words as
    fit go on each line, separated by one space. Words are the runs of non-space characters
    (any whitespace separates them). A word longer than ``width`` is cut into pieces of
    ``width`` characters (the last piece may be shorter) that start new lines, and the next
    words may follow its last piece. Return the list of lines; no words gives [].
    """
    raise NotImplementedError
