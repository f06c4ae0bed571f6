"""Run the sequence-level suite against a generation-level adapter and build its result.

Statistics (all from ``stat_tests``, each with its stated false-fail rate, n and detectable deviation):

* exact level -- ``chisquare_gof`` of the generated whole sequences against the enumerated law (bins pooled
  from p alone; an extra zero-probability category catches impossible outputs: tokens after EOS, too
  many tokens, zero-probability tokens), and one ``chisquare_gof`` per position on the marginal law of that
  position (V tokens + 'stopped'); both are likelihood-ratio tests with a proven tail (``stat_tests.lr_tail``).
  n is planned with ``stat_tests.plan_gof`` for the profile's target TV on the law pooled to <= the profile's
  ``max_bins`` bins, and never capped below it.
* PIT level -- randomized PIT of every generated token under the teacher-forced warped target law
  (``pit_values``), tested with ``pit_uniformity_test`` (KS on the PIT values, never on token ids) under
  the id ordering and the descending-probability ordering; a zero-probability token is a hard failure.
* greedy -- exact equality with plain greedy decoding of the target (hard, false-fail rate 0).
* structure (every case) -- lengths, EOS stop, ids in range: hard contract checks.

The statistical checks are those `core.registry.SEQUENCE_CHECKS` declares; the run's total false-fail
rate (the profile's sequence-level rate) is split evenly over exactly them (`core.budget_for`).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch

from ..core.profiles import Profile, get_profile
from ..core.records import CheckRecord, case_seed, hard_failure, hard_result
from ..core.registry import budget_for, run_registered
from ..core.report import SuiteResult, document, summarize_budget
from ..loader import call_implementation
from .adapters import Unsupported, adapter_name, load_adapter
from .cases import CASES, REAL_CASES, REAL_PROMPT_TEXT, Case, planned_sequences
from .exact_law import SequenceLaw, sequence_law
from .models import eos_of, last_logits, pit_pair, real_pair, tiny_pair
from .pit import pit_ks_checks, pit_of_samples
from . import draws
from . import workers as workers_mod
from ...errors import ImplementationError
from ...stat_tests import TestResult, chisquare_gof

SUITE_VERSION = 3  # 3: standard/full draw samples as rows of generate_batch calls; case workers


@contextmanager
def _torch_threads(n: int | None):
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


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
    return hard_result("structure", not problems, n, msg, {"malformed": problems[:10], "n_malformed": len(problems)})


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


def sequence_law_check(law: SequenceLaw, samples: list[list[int]], false_fail_rate: float, false_pass_rate: float,
                       tag: str = "", min_expected: float = 20.0) -> tuple[TestResult, dict]:
    """Whole generated sequences against the enumerated exact law (plus an 'impossible' category): the
    likelihood-ratio test with a proven tail (`stat_tests.lr_tail`) on bins pooled to >= min_expected."""
    counts, bad = law.counts(samples)
    probs = law.probs_with_impossible()
    labels = [_label(o) for o in law.outcomes] + [_label(None)]
    result = chisquare_gof(counts=counts, p=probs, false_fail_rate=false_fail_rate, false_pass_rate=false_pass_rate, method="lr",
                           min_expected=min_expected, name=f"sequence_chisquare{tag}")
    evidence = {"empirical_tv_to_exact_law": _tv(counts, probs), "n_outcomes": len(law.outcomes),
                "top_deviations": _top_deviations(labels, counts, probs),
                "impossible_outputs": [list(b) for b in bad[:5]], "n_impossible": len(bad)}
    return result, {f"sequence{tag}": evidence}


def position_marginal_checks(law: SequenceLaw, samples: list[list[int]], false_fail_rate: float, false_pass_rate: float,
                             tag: str = "", min_expected: float = 20.0) -> tuple[list[TestResult], dict]:
    """One likelihood-ratio test (proven tail) per position t on the marginal law of the token there (V tokens +
    'stopped'); its few categories keep min_expected 20 whatever the sequence law's pooling."""
    results, evidence = [], {}
    for t in range(law.max_new_tokens):
        pos_p = law.position_law(t)
        pos_counts = np.zeros(law.vocab + 1, dtype=np.int64)
        for s in samples:
            token = int(s[t]) if t < len(s) else law.vocab
            pos_counts[token if 0 <= token < law.vocab else law.vocab] += 1
        r = chisquare_gof(counts=pos_counts, p=pos_p, false_fail_rate=false_fail_rate, false_pass_rate=false_pass_rate, method="lr",
                          name=f"position_{t}_chisquare{tag}")
        results.append(r)
        if not r.passed:
            plabels = [str(v) for v in range(law.vocab)] + ["(stopped)"]
            evidence[f"position_{t}{tag}"] = {"empirical_tv_to_exact_marginal": _tv(pos_counts, pos_p),
                                             "observed_freq": (pos_counts / pos_counts.sum()).round(4).tolist(),
                                             "exact_prob": pos_p.round(4).tolist(),
                                             "top_deviations": _top_deviations(plabels, pos_counts, pos_p)}
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


def select_cases(profile: Profile | str, real_model: bool, names: Iterable[str] | None = None) -> list[Case]:
    """The cases a run uses: every case (quick: those marked in_quick), plus the real-model ones if asked."""
    prof = get_profile(profile)
    cases = list(CASES) + (list(REAL_CASES) if real_model else [])
    if prof.name == "quick":
        cases = [c for c in cases if c.in_quick]
    if names is not None:
        wanted = set(names)
        cases = [c for c in cases if c.name in wanted]
    return cases


class _CaseRun:
    """One case being run: its models, seeds, settings, and the records and report entry it produces."""

    def __init__(self, adapter: Any, impl: str, case: Case, profile: Profile, false_fail_rate: float,
                 progress: Callable[[str], None] | None) -> None:
        self.adapter, self.impl, self.case, self.profile = adapter, impl, case, profile
        self.settings, self.rate, self.progress = profile.sequence, false_fail_rate, progress
        self.target, self.draft, self.prompts = _models(case)
        self.vocab, self.eos = int(self.target.config.vocab_size), eos_of(self.target)
        self.base = case_seed(case.name, "sequence")  # sample i uses seed base + i
        self.records: list[CheckRecord] = []
        self.info: dict[str, Any] = {}
        self.evidence: dict[str, Any] = {}

    def add(self, category: str, result: TestResult) -> CheckRecord:
        record = CheckRecord(self.impl, self.case.name, result.name, category, result)
        self.records.append(record)
        return record

    def generate(self, prompt: Sequence[int], k: int, seed: int) -> list[int]:
        c = self.case
        out = call_implementation(self.adapter.generate, self.target, self.draft, list(prompt), c.max_new_tokens, k,
                                  c.sampling, seed)
        return [int(t) for t in out]


def _run_greedy(run: _CaseRun) -> None:
    case, mismatches, n = run.case, [], 0
    for k in case.ks:
        for j in range(run.settings.greedy_prompts):
            prompt = run.prompts[j % len(run.prompts)]
            prompt = list(prompt) if j < len(run.prompts) else list(prompt[j % 3:]) + [j % run.vocab]
            expected = plain_greedy(run.target, prompt, case.max_new_tokens)
            got = run.generate(prompt, k, run.base + j)
            n += 1
            if got != expected:
                first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
                mismatches.append({"k": k, "prompt": prompt[-12:], "expected": expected, "got": got,
                                   "first_difference_at": first})
    run.add("invariant", hard_result("greedy_equality", not mismatches, n,
                                     f"all {n} greedy outputs equal plain greedy decoding" if not mismatches else
                                     f"{len(mismatches)} of {n} greedy outputs differ from plain greedy, e.g. "
                                     f"{mismatches[0]}", {"mismatches": mismatches[:10]}))
    run.info["n"] = n


def _run_exact(run: _CaseRun) -> None:
    case, false_pass_rate = run.case, run.profile.false_pass_rate
    laws = [sequence_law(run.target, p, case.max_new_tokens, case.sampling) for p in run.prompts[: case.batch]]
    n = planned_sequences([law.probs for law in laws], run.settings, run.rate, false_pass_rate)  # never capped
    run.info.update(n=n, n_planned_for_target_tv=n, target_tv=run.settings.target_tv,
                    min_expected=run.settings.min_expected(n))
    rows, seeds = draws.draw_rows(run, n)
    run.info["rows_per_call"] = draws.rows_used(run.adapter, run.settings.rows_per_call)
    run.add("contract", structure_check([s for r in rows for s in r], case.max_new_tokens, run.eos, run.vocab,
                                        seeds * case.batch))
    tags = [""] if case.batch == 1 else [f"_row{b}" for b in range(case.batch)]

    def each_row(check: Callable) -> list[CheckRecord]:
        out = []
        for law, samples, tag in zip(laws, rows, tags):
            results, evidence = check(law, samples, run.rate, false_pass_rate, tag, run.settings.min_expected(n))
            run.evidence.update(evidence)
            out += [CheckRecord(run.impl, case.name, r.name, "exactness", r)
                    for r in (results if isinstance(results, list) else [results])]
        return out

    run.records += run_registered("sequence", case, {"sequence_law": lambda: each_row(sequence_law_check),
                                                     "position_marginals": lambda: each_row(position_marginal_checks)})


def _run_pit(run: _CaseRun) -> None:
    case = run.case
    n = run.settings.real_sequences if case.models == "real" else run.settings.pit_sequences
    prompt = list(run.prompts[0])
    samples, seeds = draws.draw(run, prompt, case.k, n)
    run.info.update(n=n, rows_per_call=draws.rows_used(run.adapter, run.settings.rows_per_call))
    run.add("contract", structure_check(samples, case.max_new_tokens, run.eos, run.vocab, seeds))
    zero_check, values = pit_of_samples(run.target, prompt, samples, seeds, case.sampling, run.base,
                                        case.max_new_tokens)
    run.add("invariant", zero_check)

    def ks() -> list[CheckRecord]:
        results, evidence = pit_ks_checks(values, run.rate, run.profile.false_pass_rate)
        run.evidence.update(evidence)
        return [CheckRecord(run.impl, case.name, r.name, "exactness", r) for r in results]

    run.records += run_registered("sequence", case, {"pit_ks": ks})


_LEVEL_RUNNERS = {"greedy": _run_greedy, "exact": _run_exact, "pit": _run_pit}


def run_case(adapter: Any, case: Case, profile: Profile | str, false_fail_rate: float, impl: str | None = None,
             progress: Callable[[str], None] | None = None) -> tuple[list[CheckRecord], dict]:
    """All checks of one case: its records and its entry in the report (status ok / unsupported / error)."""
    start, impl = time.perf_counter(), impl or adapter_name(adapter)
    entry: dict[str, Any] = {"name": case.name, "case": case.name, "level": case.level, "what": case.what,
                             "params": case.params(), "status": "ok"}
    records: list[CheckRecord] = []
    try:
        run = _CaseRun(adapter, impl, case, get_profile(profile), false_fail_rate, progress)
        try:
            _LEVEL_RUNNERS[case.level](run)
        finally:
            records, entry["evidence"] = run.records, run.evidence
            entry.update(run.info)
    except Unsupported as exc:
        entry.update(status="unsupported", reason=str(exc))
    except ImplementationError as exc:
        entry.update(status="error", reason=str(exc), traceback=getattr(exc, "traceback_text", "")[-3000:])
        records.append(hard_failure(impl, case.name, "generate", "contract", f"generate: FAIL: the adapter raised {exc}"))
    except Exception as exc:  # noqa: BLE001 - e.g. an output of the wrong type: the case cannot be judged
        import traceback

        entry.update(status="error", reason=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=6)[-3000:])
        records.append(hard_failure(impl, case.name, "run", "contract",
                                    f"run: FAIL: the case could not run on this adapter's output: {entry['reason']}"))
    entry["checks"] = [r.to_dict() for r in records]
    entry["passed"] = None if entry["status"] == "unsupported" else all(r.passed for r in records)
    entry["seconds"] = round(time.perf_counter() - start, 2)
    return records, entry


def run_sequence_result(impl: Any, profile: Profile | str = "quick", real_model: bool = False,
                        cases: Iterable[str] | None = None, fail_fast: bool = False,
                        progress: Callable[[str], None] | None = None, threads: int | None = 1,
                        workers: int = 1) -> SuiteResult:
    """Run the sequence-level suite on `impl` (adapter object, builtin name or 'MODULE:NAME'); `workers` > 1
    runs the cases in that many processes (`sequence.workers`), each on a fresh adapter."""
    adapter = load_adapter(impl)
    if adapter is None:
        raise ValueError(f"{impl!r} offers no generate(target, draft, prompt_ids, max_new_tokens, k, sampling, seed): "
                         "not a generation-level adapter (use the rule-level suite for verify adapters)")
    prof = get_profile(profile)
    selected = select_cases(prof, real_model, cases)
    budget = budget_for("sequence", prof, selected)
    name = adapter_name(adapter)
    result = SuiteResult(level="sequence", impl=name, profile=prof)
    source = workers_mod.adapter_source(impl, adapter)
    start = time.perf_counter()
    with _torch_threads(threads):
        outcomes = workers_mod.run_cases(adapter, source, selected, prof, budget.per_check_false_fail_rate, name,
                                         real_model, workers, progress, lambda e: fail_fast and e["passed"] is False)
    for records, entry in outcomes:
        result.records += records
        result.cases.append(entry)
        result.plan[entry["name"]] = {k: entry[k] for k in ("n", "n_planned_for_target_tv", "target_tv") if k in entry}
    if len(outcomes) < len(selected):
        result.notes.append(f"stopped early (fail_fast) after case {outcomes[-1][1]['name']}")
    if workers > 1 and not source.copyable:
        result.notes.append("the adapter object cannot be copied into worker processes: its cases ran serially")
    result.seconds = time.perf_counter() - start
    result.budget = summarize_budget(budget, result.records)
    result.notes += [n for n in [getattr(adapter, "notes", "")] if n]
    result.extra = {"suite_version": SUITE_VERSION, "description": getattr(adapter, "description", ""),
                    "real_model": real_model, "workers": workers if source.copyable else 1,
                    "rows_per_call": prof.sequence.rows_per_call,
                    "failed_cases": [c["name"] for c in result.cases if c["passed"] is False],
                    "unsupported_cases": [c["name"] for c in result.cases if c["status"] == "unsupported"]}
    return result


def run_sequence_suite(impl: Any, profile: Profile | str = "quick", real_model: bool = False,
                       cases: Iterable[str] | None = None, fail_fast: bool = False,
                       progress: Callable[[str], None] | None = None, threads: int | None = 1,
                       workers: int = 1) -> dict:
    """Run the sequence-level suite on `impl`; return its versioned report document (core schema 2.0)."""
    result = run_sequence_result(impl, profile, real_model, cases, fail_fast, progress, threads, workers)
    return document(result, impl if isinstance(impl, str) else result.impl)
