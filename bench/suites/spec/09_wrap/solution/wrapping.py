def wrap(text, width):
    """Break ``text`` into lines of at most ``width`` characters, greedily: as many words as
    fit go on each line, separated by one space. Words are the runs of non-space characters
    (any whitespace separates them). A word longer than ``width`` is cut into pieces of
    ``width`` characters (the last piece may be shorter) that start new lines, and the next
    words may follow its last piece. Return the list of lines; no words gives [].
    """
    lines = []
    line = ""
    for word in text.split():
        while len(word) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:width])
            word = word[width:]
        if not word:
            continue
        if line and len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            if line:
                lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines
