import fizzbuzz as f
assert f.fizzbuzz(15) == 'FizzBuzz'
assert f.fizzbuzz(30) == 'FizzBuzz'
assert f.fizzbuzz(9) == 'Fizz'
assert f.fizzbuzz(10) == 'Buzz'
assert f.fizzbuzz(7) == '7'
