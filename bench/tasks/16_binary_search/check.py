import search
xs = [1, 3, 5, 7]
for i, x in enumerate(xs):
    assert search.binary_search(xs, x) == i, x
assert search.binary_search(xs, 4) == -1
assert search.binary_search([], 1) == -1
assert search.binary_search([2], 2) == 0
