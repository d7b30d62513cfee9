"""A tiny calculator with a bug in it."""


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
