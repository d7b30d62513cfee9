def spiral_order(matrix):
    """The items of a rectangular matrix (a list of equal-length rows) in clockwise spiral
    order, starting at the top-left corner and going right first.

    [[1, 2, 3],
     [4, 5, 6],    ->  [1, 2, 3, 6, 9, 8, 7, 4, 5]
     [7, 8, 9]]

    An empty matrix, or one with empty rows, gives [].
    """
    raise NotImplementedError
