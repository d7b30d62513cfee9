import averages
assert averages.average([1, 2]) == 1.5
assert averages.average([4]) == 4
assert averages.spread([3, 1, 7]) == 6
