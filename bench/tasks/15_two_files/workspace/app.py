from shapes import circle_area, square_area


def report(radius, side):
    return f"circle {circle_area(radius):.3f}, square {square_area(side):.3f}"


if __name__ == "__main__":
    print(report(3, 2))
