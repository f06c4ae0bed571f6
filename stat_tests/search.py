"""The one search behind every ``min_num_samples_*``: the fewest samples n at which a test's detectable deviation
(its ``min_discrepancy_*``, falling with n) is at most the one asked, by doubling then bisection."""

from __future__ import annotations

from typing import Callable


def fewest_samples(
    detects: Callable[[int], bool], start: int = 1, limit: int = 10**9
) -> int | None:
    """The smallest n >= `start` with `detects(n)`, assuming it stays true once true; None past `limit`."""
    hi = start
    while not detects(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = max(start, hi // 2)  # detects(lo) is false unless lo == hi == start
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if detects(mid) else (mid, hi)
    return hi


__all__ = ["fewest_samples"]
