"""Run the sequence-level suite against a generation-level adapter and build the certificate.

Statistics (all from ``stat_tests``, all with stated alpha, n and detectable deviation):

* exact level -- ``chisquare_gof`` of the generated whole sequences against the enumerated law (bins pooled
  from p alone; an extra zero-probability category catches impossible outputs: tokens after EOS, too
  many tokens, zero-probability tokens), and one ``chisquare_gof`` per position on the marginal law of that
  position (V tokens + 'stopped'). n is planned with ``stat_tests.plan_gof`` for the profile's target TV,
  capped by the profile.
* PIT level -- randomized PIT of every generated token under the teacher-forced warped target law
  (``pit_values``), tested with ``pit_uniformity_test`` (KS on the PIT values, never on token ids) under
  the id ordering and the descending-probability ordering; a zero-probability token is a hard failure.
* greedy -- exact equality with plain greedy decoding of the target (alpha = 0).
* structure (every case) -- lengths, EOS stop, ids in range: hard checks (alpha = 0).

The family-wise false-fail rate of a run is the profile's ``total_false_fail``, split evenly (Bonferroni,
``stat_tests.ErrorBudget``) over all statistical checks of the run.
"""

from __future__ import annotations

import math
import platform
import time
import traceback
import zlib
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch

from exactspec.conformance.sequence.adapters import Unsupported, adapter_name, load_adapter
from exactspec.conformance.sequence.cases import CASES, PROFILES, REAL_CASES, REAL_PROMPT_TEXT, Case, Profile
from exactspec.conformance.sequence.exact_law import SequenceLaw, sequence_law
from exactspec.conformance.sequence.models import eos_of, last_logits, pit_pair, real_pair, target_rows, tiny_pair
from exactspec.reference.warping import SamplingParams
from exactspec.stat_tests import ErrorBudget, TestResult, chisquare_gof, pit_uniformity_test, pit_values, plan_gof

SUITE_VERSION = 1


@contextmanager
def _torch_threads(n: int | None):
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def case_seed(case: Case, salt: int = 0) -> int:
    """Deterministic base seed of a case (the i-th sample uses base + i)."""
    return (zlib.crc32(case.name.encode()) * 7919 + salt) % (2**31 - 2**20)


def _models(case: Case):
    if case.models == "tiny":
        target, draft = tiny_pair(eos_token_id=case.eos)
        return target, draft, list(case.prompts)
    if case.models == "pit":
        target, draft = pit_pair(eos_token_id=case.eos)
        return target, draft, list(case.prompts)
    target, draft, tokenizer = real_pair()
    prompt = tokenizer(REAL_PROMPT_TEXT)["input_ids"]
    return target, draft, [tuple(int(t) for t in prompt)]


def _hard(name: str, passed: bool, n: int, message: str, details: dict | None = None) -> TestResult:
    return TestResult(name, 0.0 if passed else 1.0, 1.0 if passed else 0.0, n, 0.0, 0.0, float("nan"), passed,
                      f"{name}: {'PASS' if passed else 'FAIL'}: {message}", details or {})


def structure_check(samples: Sequence[Sequence[int]], max_new_tokens: int, eos: int | None, vocab: int,
                    seeds: Sequence[int]) -> TestResult:
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
    msg = (f"all {n} outputs well formed" if not problems else
           f"{len(problems)} of {n} outputs malformed, e.g. seed {problems[0]['seed']}: {problems[0]['problem']} "
           f"(output {problems[0]['output']})")
    return _hard("structure", not problems, n, msg, {"malformed": problems[:10], "n_malformed": len(problems)})


def _tv(counts: np.ndarray, probs: np.ndarray) -> float:
    n = counts.sum()
    return float(0.5 * np.abs(counts / n - probs).sum()) if n else float("nan")


def _top_deviations(labels: list, counts: np.ndarray, probs: np.ndarray, top: int = 6) -> list[dict]:
    n = counts.sum()
    expected = n * probs
    z = (counts - expected) / np.sqrt(np.maximum(expected, 1e-12))
    z = np.where(expected > 0, z, np.where(counts > 0, np.inf, 0.0))
    order = np.argsort(-np.abs(z), kind="stable")[:top]
    return [{"outcome": labels[i], "observed": int(counts[i]), "expected": round(float(expected[i]), 2),
             "z": (None if not np.isfinite(z[i]) else round(float(z[i]), 2))} for i in order if counts[i] or expected[i]]


def _label(outcome: tuple[int, ...] | None) -> str:
    return "impossible (probability 0)" if outcome is None else " ".join(map(str, outcome)) or "(empty)"


def exact_checks(law: SequenceLaw, samples: list[list[int]], alpha: float, beta: float, tag: str = "") -> tuple[list[TestResult], dict]:
    counts, bad = law.counts(samples)
    probs = law.probs_with_impossible()
    labels = [_label(o) for o in law.outcomes] + [_label(None)]
    results = [chisquare_gof(counts=counts, p=probs, alpha=alpha, beta=beta, name=f"sequence_chisquare{tag}")]
    evidence = {
        f"sequence{tag}": {"empirical_tv_to_exact_law": _tv(counts, probs), "n_outcomes": len(law.outcomes),
                           "top_deviations": _top_deviations(labels, counts, probs),
                           "impossible_outputs": [list(b) for b in bad[:5]], "n_impossible": len(bad)}}
    for t in range(law.max_new_tokens):
        pos_p = law.position_law(t)
        pos_counts = np.zeros(law.vocab + 1, dtype=np.int64)
        for s in samples:
            if t < len(s):
                token = int(s[t])
                pos_counts[token if 0 <= token < law.vocab else law.vocab] += 1
            else:
                pos_counts[law.vocab] += 1
        r = chisquare_gof(counts=pos_counts, p=pos_p, alpha=alpha, beta=beta, name=f"position_{t}_chisquare{tag}")
        results.append(r)
        if not r.passed:
            plabels = [str(v) for v in range(law.vocab)] + ["(stopped)"]
            evidence[f"position_{t}{tag}"] = {"empirical_tv_to_exact_marginal": _tv(pos_counts, pos_p),
                                             "observed_freq": (pos_counts / pos_counts.sum()).round(4).tolist(),
                                             "exact_prob": pos_p.round(4).tolist(),
                                             "top_deviations": _top_deviations(plabels, pos_counts, pos_p)}
    return results, evidence


def pit_checks(target: Any, prompt: Sequence[int], samples: list[list[int]], seeds: Sequence[int], sampling: SamplingParams,
               alpha: float, beta: float, pit_seed: int) -> tuple[list[TestResult], dict]:
    rng_id, rng_prob = np.random.default_rng([pit_seed, 1]), np.random.default_rng([pit_seed, 2])
    u_id, u_prob, zero = [], [], []
    for s, seed in zip(samples, seeds):
        if not s:
            continue
        rows = target_rows(target, prompt, s, sampling)
        px = rows[np.arange(len(s)), np.asarray(s)]
        if (px == 0).any():
            t = int(np.flatnonzero(px == 0)[0])
            zero.append({"seed": int(seed), "position": t, "token": int(s[t]),
                         "raw_rank_of_token": int((rows[t] > 0).sum())})
            continue
        u_id.append(pit_values(s, rows, rng_id, ordering="id"))
        u_prob.append(pit_values(s, rows, rng_prob, ordering="prob"))
    n_tokens = int(sum(len(s) for s in samples))
    results = [_hard("zero_probability_tokens", not zero, n_tokens,
                     "no generated token has probability 0 under the warped target" if not zero else
                     f"{len(zero)} sequences contain a token of warped target probability 0, e.g. {zero[0]}",
                     {"examples": zero[:10]})]
    evidence: dict = {"n_pit_values": int(sum(len(u) for u in u_id))}
    for ordering, chunks in (("id", u_id), ("prob", u_prob)):
        u = np.concatenate(chunks) if chunks else np.zeros(0)
        if u.size < 2:
            results.append(_hard(f"pit_ks_{ordering}", False, int(u.size), "fewer than 2 PIT values"))
            continue
        r = pit_uniformity_test(u, alpha, beta=beta, method="ks", name=f"pit_ks_{ordering}")
        results.append(r)
        hist = np.histogram(u, bins=10, range=(0, 1))[0]
        evidence[f"pit_{ordering}"] = {"decile_counts": hist.tolist(), "expected_per_decile": u.size / 10,
                                       "mean": float(u.mean()), "ks_D": r.statistic}
    return results, evidence


@torch.no_grad()
def plain_greedy(target: Any, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy decoding of the target by teacher forcing (argmax, ties to the lowest id), EOS honoured."""
    eos, out = eos_of(target), []
    for _ in range(max_new_tokens):
        token = int(np.argmax(last_logits(target, [list(prompt) + out])[0]))
        out.append(token)
        if eos is not None and token == eos:
            break
    return out


def _n_checks(case: Case) -> int:
    if case.level == "exact":
        return case.batch * (1 + case.max_new_tokens)
    if case.level == "pit":
        return 2
    return 0


def select_cases(profile: Profile, real_model: bool, names: Iterable[str] | None = None) -> list[Case]:
    cases = list(CASES) + (list(REAL_CASES) if real_model else [])
    if profile.name == "quick":
        cases = [c for c in cases if c.in_quick]
    if names is not None:
        wanted = set(names)
        cases = [c for c in cases if c.name in wanted]
    return cases


def run_case(adapter: Any, case: Case, profile: Profile, alpha: float, progress: Callable[[str], None] | None = None) -> dict:
    start = time.perf_counter()
    record: dict[str, Any] = {"case": case.name, "level": case.level, "what": case.what, "params": case.params(),
                              "status": "ok", "checks": [], "evidence": {}}
    try:
        target, draft, prompts = _models(case)
        vocab, eos = int(target.config.vocab_size), eos_of(target)
        base = case_seed(case)
        results: list[TestResult] = []
        if case.level == "greedy":
            mismatches, n = [], 0
            for k in case.ks:
                for j in range(profile.greedy_prompts):
                    prompt = prompts[j % len(prompts)]
                    prompt = list(prompt) if j < len(prompts) else list(prompt[j % 3:]) + [j % vocab]
                    expected = plain_greedy(target, prompt, case.max_new_tokens)
                    got = adapter.generate(target, draft, prompt, case.max_new_tokens, k, case.sampling, base + j)
                    n += 1
                    if [int(t) for t in got] != expected:
                        first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
                        mismatches.append({"k": k, "prompt": prompt[-12:], "expected": expected, "got": [int(t) for t in got],
                                           "first_difference_at": first})
            results.append(_hard("greedy_equality", not mismatches, n,
                                 f"all {n} greedy outputs equal plain greedy decoding" if not mismatches else
                                 f"{len(mismatches)} of {n} greedy outputs differ from plain greedy, e.g. {mismatches[0]}",
                                 {"mismatches": mismatches[:10]}))
            record["n"] = n
        elif case.level == "exact":
            if case.batch > 1 and not callable(getattr(adapter, "generate_batch", None)):
                raise Unsupported("adapter offers no generate_batch")
            laws = [sequence_law(target, p, case.max_new_tokens, case.sampling) for p in prompts[: case.batch]]
            n_planned, bins = plan_gof(laws[0].probs, profile.target_tv, alpha, profile.beta)
            n = int(min(profile.max_sequences, max(n_planned, 200)))
            record.update(n=n, n_planned_for_target_tv=int(n_planned), target_tv=profile.target_tv)
            if case.batch == 1:
                rows = [[adapter.generate(target, draft, list(prompts[0]), case.max_new_tokens, case.k, case.sampling, base + i)
                         for i in range(n)]]
            else:
                outs = [adapter.generate_batch(target, draft, [list(p) for p in prompts[: case.batch]], case.max_new_tokens,
                                               case.k, case.sampling, base + i) for i in range(n)]
                rows = [[o[b] for o in outs] for b in range(case.batch)]
            seeds = [base + i for i in range(n)]
            results.append(structure_check([s for r in rows for s in r], case.max_new_tokens, eos, vocab, seeds * case.batch))
            for b, (law, samples) in enumerate(zip(laws, rows)):
                tag = "" if case.batch == 1 else f"_row{b}"
                r, ev = exact_checks(law, [list(map(int, s)) for s in samples], alpha, profile.beta, tag)
                results.extend(r)
                record["evidence"].update(ev)
        else:  # pit
            n = profile.real_sequences if case.models == "real" else profile.pit_sequences
            prompt = list(prompts[0])
            seeds = [base + i for i in range(n)]
            samples = []
            for i, seed in enumerate(seeds):
                samples.append([int(t) for t in adapter.generate(target, draft, prompt, case.max_new_tokens, case.k, case.sampling, seed)])
                if progress and case.models == "real" and (i + 1) % 10 == 0:
                    progress(f"    {case.name}: {i + 1}/{n} sequences")
            record["n"] = n
            results.append(structure_check(samples, case.max_new_tokens, eos, vocab, seeds))
            r, ev = pit_checks(target, prompt, samples, seeds, case.sampling, alpha, profile.beta, base)
            results.extend(r)
            record["evidence"].update(ev)
        record["checks"] = [r.to_dict() for r in results]
        record["passed"] = all(r.passed for r in results)
        record["_results"] = results
    except Unsupported as exc:
        record.update(status="unsupported", passed=None, reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - an adapter crash is a failed case, with its traceback
        record.update(status="error", passed=False, reason=f"{type(exc).__name__}: {exc}",
                      traceback=traceback.format_exc(limit=6)[-3000:])
    record["seconds"] = round(time.perf_counter() - start, 2)
    return record


def _environment() -> dict:
    import scipy
    import transformers

    return {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "torch": torch.__version__, "transformers": transformers.__version__, "machine": platform.machine(),
            "torch_threads": 1}


def run_sequence_suite(impl: Any, profile: str = "quick", real_model: bool = False, cases: Iterable[str] | None = None,
                       fail_fast: bool = False, progress: Callable[[str], None] | None = None,
                       threads: int | None = 1) -> dict:
    """Run the sequence-level suite on `impl` (adapter object, builtin name or 'MODULE:NAME'); return the report."""
    adapter = load_adapter(impl)
    if adapter is None:
        raise ValueError(f"{impl!r} offers no generate(target, draft, prompt_ids, max_new_tokens, k, sampling, seed): "
                         "not a generation-level adapter (use the rule-level suite for verify adapters)")
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {profile!r}")
    prof = PROFILES[profile]
    selected = select_cases(prof, real_model, cases)
    n_checks = max(1, sum(_n_checks(c) for c in selected))
    budget = ErrorBudget(total_false_fail=prof.total_false_fail, n_checks=n_checks, beta=prof.beta)
    alpha = budget.per_check_alpha
    start = time.perf_counter()
    records, all_results = [], []
    with _torch_threads(threads):
        for case in selected:
            if progress:
                progress(f"  case {case.name} ({case.level}) ...")
            rec = run_case(adapter, case, prof, alpha, progress)
            all_results.extend(rec.pop("_results", []))
            records.append(rec)
            if progress:
                progress(f"  case {case.name}: {rec['status']} passed={rec.get('passed')} n={rec.get('n')} ({rec['seconds']} s)")
            if fail_fast and rec.get("passed") is False:
                break
    failed = [r["case"] for r in records if r.get("passed") is False]
    stats = [r for r in all_results if r.alpha > 0]
    tvs = [r.detectable_tv for r in stats if np.isfinite(r.detectable_tv)]
    kolm = [r.details.get("detectable_kolmogorov") for r in stats if r.details.get("detectable_kolmogorov")]
    report = {
        "suite": "exactspec sequence-level conformance", "suite_version": SUITE_VERSION,
        "impl": adapter_name(adapter), "description": getattr(adapter, "description", ""),
        "notes": getattr(adapter, "notes", ""),
        "profile": profile, "real_model": real_model,
        "passed": not failed and bool(records),
        "verdict": "CERTIFIED" if (not failed and records) else "FAILED",
        "failed_cases": failed,
        "unsupported_cases": [r["case"] for r in records if r["status"] == "unsupported"],
        "error_budget": {"total_false_fail": prof.total_false_fail, "n_statistical_checks": n_checks,
                         "per_check_alpha": alpha, "beta": prof.beta,
                         "alpha_spent": float(sum(r.alpha for r in stats)),
                         "worst_detectable_binned_tv": max(tvs) if tvs else None,
                         "best_detectable_binned_tv": min(tvs) if tvs else None,
                         "worst_detectable_kolmogorov_pit": max(kolm) if kolm else None},
        "environment": _environment(),
        "seconds": round(time.perf_counter() - start, 1),
        "cases": records,
    }
    return report
