def compare_versions(a, b):
    """Compare two version strings like "1.10.2" and "1.9": -1 if a < b, 0 if equal, 1 if a > b.

    A version is dot-separated non-negative integers, compared numerically part by part; a
    missing part counts as 0 ("1.2" == "1.2.0"). A version may end in a pre-release tag
    after a hyphen ("2.0.0-rc1"): a pre-release is lower than the same version without one, and
    two tags of the same version compare as strings. Raise ValueError for anything else.
    """
    raise NotImplementedError
