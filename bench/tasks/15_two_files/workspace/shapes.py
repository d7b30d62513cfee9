import math


def circle_area(r):
    return math.pi * r * 2


def square_area(side):
    return side * side
