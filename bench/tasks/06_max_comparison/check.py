import listutils
assert listutils.largest([3, 9, 2]) == 9
assert listutils.largest([-5, -2]) == -2
assert listutils.first_index([1, 2, 2], 2) == 1
