from maze import steps_to_exit
grid = ["....", ".##.", "...#", "#..."]
assert steps_to_exit(grid, (2, 0), (0, 3)) == 5
assert steps_to_exit(grid, (3, 3), (0, 0)) == 6
assert steps_to_exit([".#.", ".#."], (0, 0), (0, 2)) == -1
assert steps_to_exit(["..", ".."], (1, 1), (0, 0)) == 2
