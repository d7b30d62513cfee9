def merge_intervals(intervals):
    """Merge overlapping closed intervals [start, end] (start <= end) and return them sorted by
    start. Intervals that only touch, like [1, 3] and [3, 5], merge into [1, 5]."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
