import re


def evaluate(expression):
    """Evaluate an arithmetic expression of non-negative integers, + - * /, parentheses and
    spaces, without eval: * and / bind tighter than + and -, operators of the same level go
    left to right, and / is exact division (the result may be a float: "7/2" -> 3.5). A unary
    minus may start an expression or follow "(" ("-(2+3)" -> -5). Raise ValueError for a
    malformed expression and ZeroDivisionError for a division by zero.
    """
    raise NotImplementedError
