"""Bins formed from the null probabilities alone (never from observed counts).

Tokens whose expected count n*p >= min_expected keep their own bin.  The rest are
sorted by descending probability (ties by id) and merged greedily, in that order, into
consecutive bins that each reach min_expected; a short remainder joins the previous bin.
Zero-probability tokens get bin -1: they are handled by the hard zero check.
"""

from __future__ import annotations

import numpy as np


def pool_bins(p: np.ndarray, n: float, min_expected: float) -> tuple[np.ndarray, np.ndarray]:
    """Return (bin_of_token, bin_prob).  bin_of_token[i] = -1 for p[i] == 0.

    Loops over bins (at most n / min_expected), never over tokens.
    """
    V = p.size
    order = np.lexsort((np.arange(V), -p))  # descending prob, ties by id
    order = order[p[order] > 0]
    e = n * p[order]
    n_big = int(np.count_nonzero(e >= min_expected))  # a prefix, since e is sorted
    labels = np.empty(order.size, dtype=np.int64)
    labels[:n_big] = np.arange(n_big)
    rare = e[n_big:]
    if rare.size:
        c = np.cumsum(rare)
        total = c[-1]
        tol = 1e-9 * min_expected
        bounds = []  # index of last token in each rare bin
        start_mass = 0.0
        while total - start_mass >= min_expected - tol:
            j = int(np.searchsorted(c, start_mass + min_expected - tol, side="left"))
            j = min(j, c.size - 1)
            bounds.append(j)
            start_mass = c[j]
        if not bounds:
            rare_labels = np.zeros(rare.size, dtype=np.int64)
            n_rare_bins = 1
        else:
            if bounds[-1] != c.size - 1:  # remainder < min_expected: join last bin
                bounds[-1] = c.size - 1
            edges = np.zeros(c.size, dtype=np.int64)
            edges[np.asarray(bounds[:-1], dtype=np.int64) + 1] = 1
            rare_labels = np.cumsum(edges)
            n_rare_bins = len(bounds)
        labels[n_big:] = n_big + rare_labels
        if not bounds and n_big > 0:  # all rare mass < min_expected: join the
            labels[n_big:] = n_big - 1  # least probable frequent token's bin
            n_rare_bins = 0
        n_bins = n_big + n_rare_bins
    else:
        n_bins = n_big
    bin_of_token = np.full(V, -1, dtype=np.int64)
    bin_of_token[order] = labels
    bin_prob = np.bincount(labels, weights=p[order], minlength=n_bins)
    return bin_of_token, bin_prob


def with_unseen_category(probs: np.ndarray) -> np.ndarray:
    """A law on known outcomes plus one empty category for every outcome it gives probability 0 (an outcome a
    rule never emits lands there and fails the test), renormalised."""
    law = np.append(np.asarray(probs, dtype=np.float64), 0.0)
    return law / law.sum()


def drop_rounding_mass(probs: np.ndarray, floor: float = 1e-12) -> np.ndarray:
    """`probs` with the entries below `floor` set to 0 and renormalised: mass that exists only by rounding
    (an acceptance rate of 1 computed as 1 - 1e-16) is not an outcome a test may expect."""
    law = np.array(probs, dtype=np.float64)
    law[law < floor] = 0.0
    return law / law.sum()
