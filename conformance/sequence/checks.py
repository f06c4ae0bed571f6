"""The sequence level's check functions on generated sequences (all from `stat_tests`, each with its stated
false-fail rate, n and detectable deviation):

* exact cases -- `assert_chisquare_gof(method="lr")` of the whole generated sequences against the enumerated law (bins
  pooled from p alone; an extra zero-probability category catches impossible outputs: tokens after EOS, too many
  tokens, zero-probability tokens), and one per position on the marginal law of that position (V tokens +
  'stopped'); both likelihood-ratio tests with a proven tail (`stat_tests.lr_tail`);
* greedy cases -- exact equality with plain greedy decoding of the target (hard, false-fail rate 0);
* every case -- the output's structure: lengths, EOS stop, ids in range (hard contract check).

The PIT cases' checks are in `pit`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from ...stat_tests import TestResult, assert_chisquare_gof
from ..core.records import hard_result
from .exact_law import SequenceLaw
from .models import eos_of, last_logits


def structure_check(
    samples: Sequence[Sequence[int]],
    max_new_tokens: int,
    eos: int | None,
    vocab: int,
    seeds: Sequence[int],
) -> TestResult:
    """Hard check of the output format: ints in [0, V), <= max_new_tokens, stop right after EOS, else full length."""
    problems = []
    for s, seed in zip(samples, seeds):
        why = None
        if any((not isinstance(t, (int, np.integer))) or t < 0 or t >= vocab for t in s):
            why = "token id out of range"
        elif len(s) > max_new_tokens:
            why = f"{len(s)} tokens > max_new_tokens={max_new_tokens}"
        elif eos is not None and eos in s[:-1]:
            why = f"tokens after EOS at position {list(s).index(eos)}"
        elif len(s) < max_new_tokens and (eos is None or len(s) == 0 or s[-1] != eos):
            why = f"stopped after {len(s)} < max_new_tokens={max_new_tokens} tokens without EOS"
        if why:
            problems.append({"seed": int(seed), "output": [int(t) for t in s][:40], "problem": why})
    n = len(samples)
    msg = (
        f"all {n} outputs well formed"
        if not problems
        else f"{len(problems)} of {n} outputs malformed, e.g. seed {problems[0]['seed']}: {problems[0]['problem']} "
        f"(output {problems[0]['output']})"
    )
    return hard_result(
        "structure",
        not problems,
        n,
        msg,
        {"malformed": problems[:10], "n_malformed": len(problems)},
    )


def _tv(counts: np.ndarray, probs: np.ndarray) -> float:
    n = counts.sum()
    return float(0.5 * np.abs(counts / n - probs).sum()) if n else float("nan")


def _top_deviations(
    labels: list, counts: np.ndarray, probs: np.ndarray, top: int = 6
) -> list[dict]:
    n = counts.sum()
    expected = n * probs
    z = (counts - expected) / np.sqrt(np.maximum(expected, 1e-12))
    z = np.where(expected > 0, z, np.where(counts > 0, np.inf, 0.0))
    order = np.argsort(-np.abs(z), kind="stable")[:top]
    return [
        {
            "outcome": labels[i],
            "observed": int(counts[i]),
            "expected": round(float(expected[i]), 2),
            "z": (None if not np.isfinite(z[i]) else round(float(z[i]), 2)),
        }
        for i in order
        if counts[i] or expected[i]
    ]


def _label(outcome: tuple[int, ...] | None) -> str:
    return (
        "impossible (probability 0)"
        if outcome is None
        else " ".join(map(str, outcome)) or "(empty)"
    )


def sequence_law_check(
    law: SequenceLaw,
    samples: list[list[int]],
    false_fail_rate: float,
    false_pass_rate: float,
    tag: str = "",
    min_expected: float = 20.0,
) -> tuple[TestResult, dict]:
    """Whole generated sequences against the enumerated exact law (plus an 'impossible' category): the
    likelihood-ratio test with a proven tail (`stat_tests.lr_tail`) on bins pooled to >= min_expected."""
    counts, bad = law.counts(samples)
    probs = law.probs_with_impossible()
    labels = [_label(o) for o in law.outcomes] + [_label(None)]
    result = assert_chisquare_gof(
        counts=counts,
        p=probs,
        false_fail_rate=false_fail_rate,
        false_pass_rate=false_pass_rate,
        method="lr",
        min_expected=min_expected,
        name=f"sequence_chisquare{tag}",
    )
    evidence = {
        "empirical_tv_to_exact_law": _tv(counts, probs),
        "n_outcomes": len(law.outcomes),
        "top_deviations": _top_deviations(labels, counts, probs),
        "impossible_outputs": [list(b) for b in bad[:5]],
        "n_impossible": len(bad),
    }
    return result, {f"sequence{tag}": evidence}


def position_marginal_checks(
    law: SequenceLaw,
    samples: list[list[int]],
    false_fail_rate: float,
    false_pass_rate: float,
    tag: str = "",
    min_expected: float = 20.0,
) -> tuple[list[TestResult], dict]:
    """One likelihood-ratio test (proven tail) per position t on the marginal law of the token there (V tokens +
    'stopped'); its few categories keep min_expected 20 whatever the sequence law's pooling."""
    results, evidence = [], {}
    for t in range(law.max_new_tokens):
        pos_p = law.position_law(t)
        pos_counts = np.zeros(law.vocab + 1, dtype=np.int64)
        for s in samples:
            token = int(s[t]) if t < len(s) else law.vocab
            pos_counts[token if 0 <= token < law.vocab else law.vocab] += 1
        r = assert_chisquare_gof(
            counts=pos_counts,
            p=pos_p,
            false_fail_rate=false_fail_rate,
            false_pass_rate=false_pass_rate,
            method="lr",
            name=f"position_{t}_chisquare{tag}",
        )
        results.append(r)
        if not r.passed:
            plabels = [str(v) for v in range(law.vocab)] + ["(stopped)"]
            evidence[f"position_{t}{tag}"] = {
                "empirical_tv_to_exact_marginal": _tv(pos_counts, pos_p),
                "observed_freq": (pos_counts / pos_counts.sum()).round(4).tolist(),
                "exact_prob": pos_p.round(4).tolist(),
                "top_deviations": _top_deviations(plabels, pos_counts, pos_p),
            }
    return results, evidence


@torch.no_grad()
def plain_greedy(target: Any, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy decoding of the target by teacher forcing (argmax, ties to the lowest id), EOS honoured."""
    eos = eos_of(target)
    out: list[int] = []
    for _ in range(max_new_tokens):
        token = int(np.argmax(last_logits(target, [list(prompt) + out])[0]))
        out.append(token)
        if eos is not None and token == eos:
            break
    return out
