def lcs_length(a, b):
    """Length of the longest common subsequence of the sequences ``a`` and ``b``.

    A subsequence keeps the order of the items but may skip some: "ace" is a subsequence of
    "abcde", so lcs_length("abcde", "ace") is 3.
    """
    rows = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                rows[i][j] = rows[i - 1][j - 1] + 1
            else:
                rows[i][j] = max(rows[i - 1][j], rows[i][j - 1])
    return rows[len(a)][len(b)]
