import geometry
assert geometry.distance((0, 0), (3, 4)) == 5
assert abs(geometry.perimeter([(0, 0), (1, 0), (1, 1), (0, 1)]) - 4) < 1e-9
