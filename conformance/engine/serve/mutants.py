"""The engine level's mutant zoo: exactspec's own generators and every generation-level mutant
(`conformance.sequence.mutants`), each served over llama.cpp's protocol on 127.0.0.1 (`mutant_server`), sampled
by the collector (`collect`) and judged by the engine level, as a serving engine would be. This is what
`exactspec kill-table --level engine` runs (and `tests/test_engine_meta.py`, with the mutants' measured
deviations).

One reference server (exactspec's plain loop, speculation off) answers for every candidate: its completions are
collected once per process and profile and shared, and it teacher-forces each candidate's prefixes. Sizes follow
the profile (`sizes`): the tuple check's detectable TV (`TARGET_TV`) and the profile's target mean per-token TV
for the PIT (so a correct generator can be CERTIFIED, and a mutant whose mean per-token TV at the drafted
positions reaches the target is rejected by the PIT when its deviation is monotone). Every request is bounded in
count and time by the collector, and every server is stopped when its collection ends (the reference at exit).
"""

from __future__ import annotations

import atexit
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....stat_tests import detectable_tv, units_for_mean_token_tv
from ...core.level import REJECTED, Subject
from ..collect.client import SamplerChain

CHAIN = SamplerChain(temperature=0.5, top_k=3, max_tokens=4)  # T != 1 and a top-k: what most mutants need
K = 2  # drafts per round: a bonus token and a second round inside the 4 compared positions
EOS = 4  # a likely token under top-k 3, so EOS falls inside drafts
MODEL_NAME = "tiny-llama-v6-seed14"
SPECULATION = {"type": "draft-model", "draft_sampling": "probabilistic", "expect_seed_coupled": False}
PROMPTS = [{"prompt_id": "A", "prompt_tokens": [0, 2, 3, 4, 2, 3, 4, 2, 3]}]  # sequence.cases.PROMPT_A
#: Sizing: a profile's engine budget is spent over 8 checks of the one prompt (4 marginals, the tuple, the
#: reference's self-check, the near-zero count, the PIT); the reference sample is shared, so it is larger and each
#: candidate needs fewer samples for the same n_eff. The PIT pools the 3 drafted positions of each completion.
TARGET_TV, TARGET_BINS, N_CHECKS, DRAFTED_POSITIONS = 0.2, 20, 8, 3
N_REFERENCE = {"quick": 2000, "standard": 6000, "full": 20000}
TIME_LIMIT_S = {"quick": 600.0, "standard": 3600.0, "full": 14400.0}
#: The valid rows: a backend kind, what it is, the verdict it must get.
VALID = (("gpu_impl", "exactspec's SpeculativeGenerator (model draft), served", "CERTIFIED"),
         ("reference_loop", "the textbook speculative loop, served", "CERTIFIED"),
         ("plain", "the plain loop served as the candidate: exact, but it never drafts", "INCONCLUSIVE"))


@dataclass(frozen=True)
class ZooSizes:
    """What the zoo collects at one profile: the shared reference's and each candidate's completions."""

    profile: str
    per_check_rate: float
    n_reference: int
    n_candidate: int
    time_limit_s: float


def sizes(profile: str = "quick") -> ZooSizes:
    """The zoo's sizes at `profile`: the candidate n is the smallest whose tuple check (TARGET_BINS bins) detects
    TARGET_TV and whose PIT reaches the profile's target mean per-token TV (with the reports' rounding slack)."""
    from ...core.profiles import get_profile
    from ..pit import REPORT_ROUNDING

    prof = get_profile(profile)
    level, false_pass_rate, n_reference = prof.engine.total_false_fail / N_CHECKS, prof.false_pass_rate, \
        N_REFERENCE[prof.name]
    n_eff = next(n for n in range(50, 10_000, 10)
                 if detectable_tv(n, TARGET_BINS, level / 2, false_pass_rate / 2) <= TARGET_TV)
    if n_eff >= n_reference:
        raise ValueError(f"n_reference={n_reference} is too small for n_eff={n_eff}")
    pit_units = units_for_mean_token_tv(prof.engine.target_tv, DRAFTED_POSITIONS, level, false_pass_rate,
                                        6 * REPORT_ROUNDING)  # 6 reported probabilities (teacher_n_probs)
    n_candidate = max(math.ceil(n_eff * n_reference / (n_reference - n_eff)), pit_units or 0)
    return ZooSizes(prof.name, level, n_reference, n_candidate, TIME_LIMIT_S[prof.name])


def settings(n_seeds: int, size: ZooSizes, seed_start: int = 1) -> Any:
    """Candidates get seeds disjoint from the reference's (independent samples; no seed coupling is claimed)."""
    from ..collect.command import Settings

    return Settings(chain=CHAIN, n_seeds=n_seeds, seed_start=seed_start, concurrency=4,
                    max_requests=3 * max(size.n_reference, size.n_candidate), time_limit_s=size.time_limit_s,
                    model_name=MODEL_NAME, speculation=SPECULATION, teacher_n_probs=6, engine_name="exactspec-serve")


def backend(kind: str) -> Any:
    """The served generator `kind` on the tiny pair (a batch-rows mutant gets a concurrent companion prompt)."""
    from ...sequence.cases import PROMPT_B
    from ...sequence.models import tiny_pair
    from .mutant_backends import make_backend

    target, draft = tiny_pair(eos_token_id=EOS)
    companion = PROMPT_B if kind == "mutant-batch-rows-swapped" else None
    return make_backend(kind, target, draft, k=K, companion=companion)  # "plain" ignores k and the draft


class SharedReference:
    """The reference server (plain loop) and its sample directory, alive until `close`."""

    def __init__(self, root: Path, profile: str = "quick") -> None:
        from ..collect.command import collect_samples
        from .mutant_server import EngineServer

        self.root, self.size = root, sizes(profile)
        self.server = EngineServer(backend("plain"), model_name=MODEL_NAME)
        self.server.__enter__()
        self.dir = root / "reference"
        if collect_samples(PROMPTS, self.dir, self.reference_settings(), reference_url=self.server.base_url) != 0:
            self.close()
            raise RuntimeError("the reference collection did not finish within its bounds")

    def reference_settings(self) -> Any:
        return settings(self.size.n_reference, self.size)

    def pair(self, kind: str, out_dir: Path | None = None) -> Any:
        """Serve `kind`, collect its samples, teacher-force the reference on them: the SamplePair to certify."""
        from ..collect.command import collect_samples
        from ..cases import SamplePair
        from .mutant_server import EngineServer
        from ..samples import read_samples

        out = out_dir or Path(tempfile.mkdtemp(prefix=f"candidate-{kind}-", dir=self.root))
        with EngineServer(backend(kind), model_name=MODEL_NAME) as server:
            status = collect_samples(PROMPTS, out, settings(self.size.n_candidate, self.size, self.size.n_reference + 1),
                                     candidate_url=server.base_url)
        if status != 0:
            raise RuntimeError(f"{kind}: the candidate collection did not finish within its bounds")
        status = collect_samples(PROMPTS, self.dir, self.reference_settings(), reference_url=self.server.base_url,
                                 teacher_force=out / "candidate.jsonl")
        if status != 0:
            raise RuntimeError(f"{kind}: teacher forcing did not finish within its bounds")
        return SamplePair(read_samples(self.dir / "reference.jsonl"), read_samples(out / "candidate.jsonl"))

    def close(self) -> None:
        self.server.__exit__(None, None, None)
        shutil.rmtree(self.root, ignore_errors=True)


_SHARED: dict[str, SharedReference] = {}


def shared_reference(profile: str = "quick") -> SharedReference:
    """The process's reference at `profile` (started on first use, stopped at exit)."""
    if profile not in _SHARED:
        root = Path(tempfile.mkdtemp(prefix=f"exactspec-engine-zoo-{profile}-"))
        _SHARED[profile] = SharedReference(root, profile)
        atexit.register(_SHARED[profile].close)
    return _SHARED[profile]


def subjects(profile: str = "quick") -> list[Subject]:
    """Every generation-level mutant served (each must be rejected), then the valid rows, sized for `profile`."""
    from ...sequence.mutants import MUTANTS

    def served(kind: str):
        return lambda: shared_reference(profile).pair(kind)

    rows = [Subject(m.name, "mutant", " ".join((m.__doc__ or "").split()), (REJECTED,), served(m.name))
            for m in MUTANTS]
    return rows + [Subject(kind, "valid", what, (verdict,), served(kind)) for kind, what, verdict in VALID]
