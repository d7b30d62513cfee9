import series
assert series.sum_to(3) == 6
assert series.sum_to(1) == 1
assert series.sum_to(10) == 55
assert series.squares(3) == [1, 4, 9]
