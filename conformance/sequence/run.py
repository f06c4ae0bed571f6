"""One sequence-level case run on its models (this module needs torch; the declaration in `level` does not, so the
loader can ask it what an object offers without torch): the samples of each kind of case (greedy, exact, pit) and the
hard records about them; the registered checks (`registry`) then read the run.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..core.profiles import Profile
from ..core.records import CheckRecord, case_seed, hard_result
from ..loader import call_implementation
from . import draws
from .cases import Case
from .checks import plain_greedy, structure_check
from .models import case_models, eos_of
from .pit import pit_of_samples
from .registry import case_laws


class SequenceRun:
    """One case being run: its models, seeds and settings; the samples, and what the checks add to the report."""

    def __init__(self, subject: Any, case: Case, profile: Profile) -> None:
        """`subject`: the adapter and its name (`level.Generator`)."""
        self.adapter, self.impl, self.case, self.profile = (
            subject.adapter,
            subject.name,
            case,
            profile,
        )
        self.settings = profile.sequence
        # samples per generate_batch call (draws)
        self.rows_per_call = self.settings.rows_for(case.level)
        self.target, self.draft, self.prompts = case_models(case)
        self.vocab, self.eos = int(self.target.config.vocab_size), eos_of(self.target)
        self.base = case_seed(case.name, "sequence")  # sample i uses seed base + i
        self.info: dict[str, Any] = {}
        self.evidence: dict[str, Any] = {}
        self.laws: tuple = ()
        self.rows: list = []
        self.values: dict = {}

    def generate(self, prompt: Sequence[int], k: int, seed: int) -> list[int]:
        c = self.case
        out = call_implementation(
            self.adapter.generate,
            self.target,
            self.draft,
            list(prompt),
            c.max_new_tokens,
            k,
            c.sampling,
            seed,
        )
        return [int(t) for t in out]

    def record(self, category: str, result: Any) -> CheckRecord:
        return CheckRecord(self.impl, self.case.name, result.name, category, result)


def _greedy(run: SequenceRun) -> list[CheckRecord]:
    case, mismatches, n = run.case, [], 0
    for k in case.ks:
        for j in range(run.settings.greedy_prompts):
            base = run.prompts[j % len(run.prompts)]
            prompt = list(base) if j < len(run.prompts) else list(base[j % 3 :]) + [j % run.vocab]
            expected = plain_greedy(run.target, prompt, case.max_new_tokens)
            got = run.generate(prompt, k, run.base + j)
            n += 1
            if got != expected:
                first = next(
                    (i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
                    min(len(got), len(expected)),
                )
                mismatches.append(
                    {
                        "k": k,
                        "prompt": prompt[-12:],
                        "expected": expected,
                        "got": got,
                        "first_difference_at": first,
                    }
                )
    run.info["n"] = n
    return [
        run.record(
            "invariant",
            hard_result(
                "greedy_equality",
                not mismatches,
                n,
                f"all {n} greedy outputs equal plain greedy decoding"
                if not mismatches
                else f"{len(mismatches)} of {n} greedy outputs differ from plain greedy, e.g. {mismatches[0]}",
                {"mismatches": mismatches[:10]},
            ),
        )
    ]


def _exact(run: SequenceRun, n: int) -> list[CheckRecord]:
    case = run.case
    run.laws = case_laws(case)
    run.info.update(
        n=n,
        n_planned_for_target_tv=n,
        target_tv=run.settings.target_tv,
        min_expected=run.settings.min_expected(n),
    )
    run.rows, seeds = draws.draw_rows(run, n)
    run.info["rows_per_call"] = draws.rows_used(run.adapter, run.rows_per_call)
    return [
        run.record(
            "contract",
            structure_check(
                [s for r in run.rows for s in r],
                case.max_new_tokens,
                run.eos,
                run.vocab,
                seeds * case.batch,
            ),
        )
    ]


def _pit(run: SequenceRun, n: int) -> list[CheckRecord]:
    case, prompt = run.case, list(run.prompts[0])
    samples, seeds = draws.draw(run, prompt, case.k, n)
    run.info.update(n=n, rows_per_call=draws.rows_used(run.adapter, run.rows_per_call))
    structure = run.record(
        "contract", structure_check(samples, case.max_new_tokens, run.eos, run.vocab, seeds)
    )
    zero_check, run.values = pit_of_samples(
        run.target, prompt, samples, seeds, case.sampling, run.base, case.max_new_tokens
    )
    return [structure, run.record("invariant", zero_check)]


def run_case(
    subject: Any, case: Case, profile: Profile, n: int
) -> tuple[SequenceRun, list[CheckRecord]]:
    """The run of `case` on `subject` (n samples for an exact or pit case; a greedy case ignores n) and its hard
    records."""
    run = SequenceRun(subject, case, profile)
    hard = {
        "greedy": lambda: _greedy(run),
        "exact": lambda: _exact(run, n),
        "pit": lambda: _pit(run, n),
    }[case.level]()
    return run, hard
