from collections import deque


def steps_to_exit(grid, start, goal):
    """The fewest moves (up, down, left, right) from ``start`` to ``goal`` in ``grid``, a list of
    equal-length strings where "#" is a wall and "." is open; positions are (row, column).
    Return -1 if the goal cannot be reached."""
    rows, cols = len(grid), len(grid[0])
    dist = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return dist[(r, c)]
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] != "#" and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    return -1
