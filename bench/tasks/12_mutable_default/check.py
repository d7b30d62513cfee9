import cart
assert cart.add_item('a') == ['a']
assert cart.add_item('b') == ['b']
mine = ['x']
assert cart.add_item('y', mine) == ['x', 'y']
assert cart.total(['a', 'b'], {'a': 1, 'b': 2}) == 3
