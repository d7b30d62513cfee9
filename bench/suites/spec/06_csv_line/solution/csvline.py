def split_csv_line(line, sep=","):
    """Split one line of CSV into its fields (strings), without the csv module.

    Fields are separated by ``sep``. A field may be quoted with double quotes; inside quotes
    ``sep`` is an ordinary character and a doubled quote ("") stands for one quote. The quotes
    around a field are not part of its value. An empty line is one empty field. Raise
    ValueError for a quote that is never closed.
    """
    fields, current, quoted, i = [], [], False, 0
    while i < len(line):
        ch = line[i]
        if quoted:
            if ch == '"' and line[i + 1 : i + 2] == '"':
                current.append('"')
                i += 1
            elif ch == '"':
                quoted = False
            else:
                current.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == sep:
            fields.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    if quoted:
        raise ValueError("unclosed quote")
    fields.append("".join(current))
    return fields
