def spiral_order(matrix):
    """The items of a rectangular matrix (a list of equal-length rows) in clockwise spiral
    order, starting at the top-left corner and going right first.

    [[1, 2, 3],
     [4, 5, 6],    ->  [1, 2, 3, 6, 9, 8, 7, 4, 5]
     [7, 8, 9]]

    An empty matrix, or one with empty rows, gives [].
    """
    out = []
    if not matrix or not matrix[0]:
        return out
    top, bottom, left, right = 0, len(matrix) - 1, 0, len(matrix[0]) - 1
    while top <= bottom and left <= right:
        out.extend(matrix[top][c] for c in range(left, right + 1))
        out.extend(matrix[r][right] for r in range(top + 1, bottom + 1))
        if top < bottom:
            out.extend(matrix[bottom][c] for c in range(right - 1, left - 1, -1))
        if left < right:
            out.extend(matrix[r][left] for r in range(bottom - 1, top, -1))
        top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
    return out
