import temperature as t
assert abs(t.to_celsius(212) - 100) < 1e-9
assert abs(t.to_celsius(32)) < 1e-9
assert abs(t.to_fahrenheit(100) - 212) < 1e-9
