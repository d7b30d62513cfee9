import text
assert text.count_words('a b a') == {'a': 2, 'b': 1}
assert text.count_words('') == {}
assert text.shout('hi') == 'HI!'
