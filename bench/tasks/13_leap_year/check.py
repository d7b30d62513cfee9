import dates
assert not dates.is_leap(1900)
assert dates.is_leap(2000)
assert dates.is_leap(2024)
assert not dates.is_leap(2023)
assert dates.days_in_year(1900) == 365
