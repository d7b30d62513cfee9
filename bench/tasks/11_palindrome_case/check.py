import strings
assert strings.is_palindrome('Racecar')
assert strings.is_palindrome('abba')
assert not strings.is_palindrome('abc')
assert strings.initials('Ada Lovelace') == 'AL'
