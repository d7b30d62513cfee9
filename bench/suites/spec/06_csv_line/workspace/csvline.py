def split_csv_line(line, sep=","):
    """Split one line of CSV into its fields (strings), without the csv module.

    Fields are separated by ``sep``. A field may be quoted with double quotes; inside quotes
    ``sep`` is an ordinary character and a doubled quote ("") stands for one quote. The quotes
    around a field are not part of its value. An empty line is one empty field. Raise
    ValueError for a quote that is never closed.
    """
    raise NotImplementedError
