import mathutils
assert mathutils.product([2, 3, 4]) == 24
assert mathutils.product([]) == 1
assert mathutils.clamp(5, 0, 3) == 3
