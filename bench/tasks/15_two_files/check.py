import shapes, app
assert abs(shapes.circle_area(3) - 28.274333882308138) < 1e-9
assert shapes.square_area(3) == 9
assert app.report(3, 2) == 'circle 28.274, square 4.000'
