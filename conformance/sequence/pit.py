"""The PIT level's checks: every generated token's randomized PIT under the teacher-forced warped target law.

A token of warped target probability 0 is a hard failure; the PIT values (id ordering and descending-probability
ordering), padded with fresh uniforms after an EOS so every sequence gives max_new_tokens of them, are tested
for uniformity by `stat_tests.assert_pit_uniform` (exact KS on PIT values, never on token ids).
Teacher forcing is batched (`models.target_rows_many`: one forward per group of equal-length samples).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.records import hard_result
from .models import target_rows_many
from ...reference.warping import SamplingParams
from ...stat_tests import TestResult, assert_pit_uniform, pit_values


def pit_of_samples(
    target: Any,
    prompt: Sequence[int],
    samples: list[list[int]],
    seeds: Sequence[int],
    sampling: SamplingParams,
    pit_seed: int,
    length: int,
) -> tuple[TestResult, dict[str, np.ndarray]]:
    """The hard zero-probability check and `length` PIT values per sequence (id and prob order): its tokens'
    randomized PIT values, then fresh U(0, 1) draws for the positions after it stopped (EOS).

    Why the padding: each value is U(0, 1) given all earlier ones (a token's PIT under exactness, a fresh draw
    after the stop), so every sequence gives `length` i.i.d. uniforms and the KS law is exact. Pooling only the
    tokens would make the number of values depend on them (a sequence stops on the values that mean EOS)."""
    rng_id, rng_prob = np.random.default_rng([pit_seed, 1]), np.random.default_rng([pit_seed, 2])
    pad = np.random.default_rng([pit_seed, 3])
    u_id, u_prob, zero = [], [], []
    for i, rows in target_rows_many(target, prompt, samples, sampling):
        s, seed = samples[i], seeds[i]
        px = rows[np.arange(len(s)), np.asarray(s)]
        if (px == 0).any():
            t = int(np.flatnonzero(px == 0)[0])
            zero.append(
                {
                    "seed": int(seed),
                    "position": t,
                    "token": int(s[t]),
                    "raw_rank_of_token": int((rows[t] > 0).sum()),
                }
            )
            continue
        fill = pad.random((2, max(0, length - len(s))))
        u_id.append(np.concatenate([pit_values(s, rows, rng_id, ordering="id"), fill[0]]))
        u_prob.append(np.concatenate([pit_values(s, rows, rng_prob, ordering="prob"), fill[1]]))
    n_tokens = int(sum(len(s) for s in samples))
    zero_check = hard_result(
        "zero_probability_tokens",
        not zero,
        n_tokens,
        "no generated token has probability 0 under the warped target"
        if not zero
        else f"{len(zero)} sequences contain a token of warped target probability 0, e.g. {zero[0]}",
        {"examples": zero[:10]},
    )
    values = {
        ordering: (np.concatenate(chunks) if chunks else np.zeros(0))
        for ordering, chunks in (("id", u_id), ("prob", u_prob))
    }
    return zero_check, values


def pit_ks_checks(
    values: dict[str, np.ndarray], false_fail_rate: float, false_pass_rate: float
) -> tuple[list[TestResult], dict]:
    """KS uniformity of the PIT values under each ordering."""
    results: list[TestResult] = []
    evidence: dict[str, Any] = {"n_pit_values": int(values["id"].size)}
    for ordering, u in values.items():
        if u.size < 2:
            results.append(
                hard_result(f"pit_ks_{ordering}", False, int(u.size), "fewer than 2 PIT values")
            )
            continue
        r = assert_pit_uniform(
            u,
            false_fail_rate,
            false_pass_rate=false_pass_rate,
            method="ks",
            name=f"pit_ks_{ordering}",
        )
        results.append(r)
        hist = np.histogram(u, bins=10, range=(0, 1))[0]
        evidence[f"pit_{ordering}"] = {
            "decile_counts": hist.tolist(),
            "expected_per_decile": u.size / 10,
            "mean": float(u.mean()),
            "ks_D": r.statistic,
        }
    return results, evidence
