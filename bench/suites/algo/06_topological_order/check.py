from toposort import topological_order
assert topological_order([1, 2, 3], [(1, 3), (2, 3)]) == [1, 2, 3]
assert topological_order(["a", "b", "c", "d"], [("d", "a"), ("c", "a"), ("b", "c")]) == ["b", "c", "d", "a"]
assert topological_order([5, 4, 3, 2, 1], [(5, 1), (4, 1), (3, 1)]) == [2, 3, 4, 5, 1]
try:
    topological_order([1, 2], [(1, 2), (2, 1)])
except ValueError:
    pass
else:
    raise AssertionError("a cycle must raise ValueError")
