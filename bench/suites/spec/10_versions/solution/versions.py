def compare_versions(a, b):
    """Compare two version strings like "1.10.2" and "1.9": -1 if a < b, 0 if equal, 1 if a > b.

    A version is dot-separated non-negative integers, compared numerically part by part; a
    missing part counts as 0 ("1.2" == "1.2.0"). A version may end in a pre-release tag
    after a hyphen ("2.0.0-rc1"): a pre-release is lower than the same version without one, and
    two tags of the same version compare as strings. Raise ValueError for anything else.
    """
    def parse(text):
        core, _, tag = text.partition("-")
        parts = core.split(".")
        if not all(p.isdigit() for p in parts) or (_ and not tag):
            raise ValueError(text)
        return [int(p) for p in parts], tag

    (pa, ta), (pb, tb) = parse(a), parse(b)
    size = max(len(pa), len(pb))
    pa, pb = pa + [0] * (size - len(pa)), pb + [0] * (size - len(pb))
    if pa != pb:
        return -1 if pa < pb else 1
    if ta == tb:
        return 0
    if not ta or not tb:
        return -1 if ta else 1
    return -1 if ta < tb else 1
