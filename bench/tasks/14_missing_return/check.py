import discount
assert discount.final_price(100, 10) == 90.0
assert discount.final_price(50, 150) == 0.0
