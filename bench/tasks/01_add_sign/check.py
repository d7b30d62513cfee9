import calc
assert calc.add(2, 3) == 5
assert calc.add(-1, 1) == 0
assert calc.mul(2, 3) == 6
