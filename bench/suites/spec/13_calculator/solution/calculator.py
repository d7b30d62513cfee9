import re


def evaluate(expression):
    """Evaluate an arithmetic expression of non-negative integers, + - * /, parentheses and
    spaces, without eval: * and / bind tighter than + and -, operators of the same level go
    left to right, and / is exact division (the result may be a float: "7/2" -> 3.5). A unary
    minus may start an expression or follow "(" ("-(2+3)" -> -5). Raise ValueError for a
    malformed expression and ZeroDivisionError for a division by zero.
    """
    tokens = re.findall(r"\d+|[-+*/()]|\S", expression)
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom():
        tok = take() if peek() is not None else None
        if tok == "-":
            return -atom()
        if tok == "(":
            value = expr()
            if take() if peek() == ")" else None:
                return value
            raise ValueError(expression)
        if tok is not None and tok.isdigit():
            return int(tok)
        raise ValueError(expression)

    def term():
        value = atom()
        while peek() in ("*", "/"):
            value = value * atom() if take() == "*" else value / atom()
        return value

    def expr():
        value = term()
        while peek() in ("+", "-"):
            value = value + term() if take() == "+" else value - term()
        return value

    result = expr()
    if pos != len(tokens):
        raise ValueError(expression)
    return result
