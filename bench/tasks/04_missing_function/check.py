import stats
assert stats.count_even([1, 2, 3, 4, 6]) == 3
assert stats.is_even(0) and not stats.is_even(7)
assert stats.mean([1, 2, 3]) == 2
