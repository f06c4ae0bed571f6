"""The engine level's mutant zoo: exactspec's own generators and the generation-level mutants it names
(`SERVED_MUTANTS`, from `conformance.sequence.mutants`), each served over llama.cpp's protocol on 127.0.0.1
(`mutant_server`) and certified by the one command's rounds (`collect.campaign`), as a serving engine would be.
`zoo(profile)` is its `core.mutants.MutantSpec`s: what `exactspec kill-table --level engine` runs (and
`tests/test_engine_meta.py`, with the mutants' measured per-token deviations, `zoo_deviation`). A new
generation-level mutant joins this zoo only when it is added to `SERVED_MUTANTS`.

One reference server (exactspec's plain loop, speculation off) answers for every candidate, and one draft server
(the draft model's plain loop) gives the draft's reports of each candidate's prefixes (`draft.jsonl`: a NOT_EXACT's
diagnosis fits the mechanisms that read q; no check reads them). Every campaign of a process draws the same random
seeds (one key), so the reference's completions and reports collected for one candidate are reused by the next (its
file is handed on). Each campaign stops at its first verdict or at the
profile's time limit; every server is stopped when its campaign ends (the reference at exit).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ....outcomes import Verdict
from ...core.mutants import MutantSpec, by_name, mutant, valid_variant
from ...core.mutants import zoo as as_zoo
from ...sequence.cases import PROMPT_B
from ...sequence.models import tiny_pair
from ...sequence.mutants import ZOO as SEQUENCE_ZOO
from ..cases import SamplePair
from ..collect.campaign import Certification, run_campaign
from ..collect.client import SamplerChain
from ..collect.design import SeedDesign
from ..collect.draft_reports import collect_draft_reports
from ..collect.plan import CollectionPlan, Forcing, Identity, Limits
from ..samples import read_samples
from .mutant_backends import make_backend
from .mutant_server import EngineServer

# T != 1 and a top-k: what most mutants need
CHAIN = SamplerChain(temperature=0.5, top_k=3, max_tokens=4)
K = 2  # drafts per round: a bonus token and a second round inside the 4 compared positions
EOS = 4  # a likely token under top-k 3, so EOS falls inside drafts
MODEL_NAME = "tiny-llama-v6-seed14"
SPECULATION = {
    "type": "draft-model",
    "draft_sampling": "probabilistic",
    "expect_seed_coupled": False,
}
# sequence.cases.PROMPT_A
PROMPTS = [{"prompt_id": "A", "prompt_tokens": [0, 2, 3, 4, 2, 3, 4, 2, 3]}]
TIME_LIMIT_S = {"quick": 600.0, "standard": 1800.0, "full": 7200.0}
#: The zoo's seed key: every run of the zoo draws the same random seeds, so its kill table and its tests are
#: reproducible (the mutants are deterministic per seed; only the batch-rows mutant also depends on timing).
SEED_KEY = "e5e5e5e5000000000000000000005eed"
#: The generation-level mutants this zoo serves (names in `sequence.mutants.ZOO`), in its order.
SERVED_MUTANTS = (
    "mutant-draft-temperature-mismatch",
    "mutant-target-verified-at-t1",
    "mutant-top-k-draft-only",
    "mutant-q-from-raw-logits",
    "mutant-bonus-from-wrong-row",
    "mutant-kv-not-rolled-back",
    "mutant-batch-rows-swapped",
    "mutant-seed-reused-each-round",
    "mutant-resample-from-p",
    "mutant-eos-only-at-round-end",
)
#: What a NOT_EXACT's diagnosis names each mutant by (`engine.diagnosis`): its mechanism, in the diagnosis's families
#: (a token outside the support is named by the hard check that finds it; the draft's reports let the families that
#: read q name the rule's own bugs). Every mutant of `SERVED_MUTANTS` has an entry; `tests/test_engine_meta.py`
#: asserts it.
DIAGNOSES = {
    "mutant-draft-temperature-mismatch": "draft-law-mismatch",  # drafts at T = 1, q at T: theta ~ 1/2
    "mutant-target-verified-at-t1": "outside-support",  # the chain's top-k skipped (and the target at T = 1)
    "mutant-top-k-draft-only": "outside-support",  # the target's rows not truncated
    "mutant-q-from-raw-logits": "q-from-raw-logits",
    "mutant-bonus-from-wrong-row": "outside-support",  # a token of the previous row (at the listed: stale-row)
    "mutant-kv-not-rolled-back": "outside-support",  # a row of a context that kept the rejected draft
    "mutant-batch-rows-swapped": "outside-support",  # the other request's row
    "mutant-seed-reused-each-round": "reused-uniform",
    "mutant-resample-from-p": "resample-from-p",
    "mutant-eos-only-at-round-end": "tokens-past-end",
}
#: The valid rows: a backend kind, what it is, the verdict it must get.
VALID = (
    ("gpu_impl", "exactspec's SpeculativeGenerator (model draft), served", Verdict.CERTIFIED),
    ("reference_loop", "the textbook speculative loop, served", Verdict.CERTIFIED),
    (
        "plain",
        "the plain loop served as the candidate: exact, but it never drafts",
        Verdict.INCONCLUSIVE,
    ),
)


def plan(seed_key: str, profile: str = "quick") -> CollectionPlan:
    """The zoo's collection plan (without URLs): the chain, 4 candidate requests in flight, the reports' top 6, one
    seed key, at most 40000 completions a prompt (the profile's time limit a safety net far above a run's time)."""
    return CollectionPlan(
        law=CHAIN,
        seeds=SeedDesign(key=seed_key),
        limits=Limits(time_limit_s=TIME_LIMIT_S[profile], first_round=64, max_per_prompt=40_000),
        identity=Identity(
            engine_name="exactspec-serve", speculation=SPECULATION, model_name=MODEL_NAME
        ),
        forcing=Forcing(teacher_n_probs=6, reference_n_probs=6),
    )


def backend(kind: str) -> Any:
    """The served generator `kind` on the tiny pair (a batch-rows mutant gets a concurrent companion prompt);
    "draft": the draft model's plain loop."""
    target, draft = tiny_pair(eos_token_id=EOS)
    if kind == "draft":
        return make_backend("plain", draft)
    companion = PROMPT_B if kind == "mutant-batch-rows-swapped" else None
    # "plain" ignores k and the draft
    return make_backend(kind, target, draft, k=K, companion=companion)


class SharedReference:
    """The reference server (plain loop), its sample file handed from campaign to campaign, alive until `close`."""

    def __init__(self, root: Path, profile: str = "quick") -> None:
        self.root, self.profile, self.key = root, profile, SEED_KEY
        self.file = root / "reference.jsonl"
        self.server = EngineServer(backend("plain"), model_name=MODEL_NAME)
        self.server.__enter__()
        self.draft_server = EngineServer(backend("draft"), model_name=MODEL_NAME + "-draft")
        self.draft_server.__enter__()

    def pair(self, kind: str, out_dir: Path | None = None) -> Any:
        """Serve `kind` and certify it in rounds (`run_campaign`): the SamplePair of its last look."""
        out = Path(out_dir or tempfile.mkdtemp(prefix=f"candidate-{kind}-", dir=self.root))
        out.mkdir(parents=True, exist_ok=True)
        if self.file.exists():
            shutil.copyfile(self.file, out / "reference.jsonl")
        with EngineServer(backend(kind), model_name=MODEL_NAME) as server:
            urls = plan(self.key, self.profile).with_urls([self.server.base_url], [server.base_url])
            run_campaign(PROMPTS, out, urls, Certification(self.profile))
        shutil.copyfile(out / "reference.jsonl", self.file)
        reference, candidate = (
            read_samples(out / "reference.jsonl"),
            read_samples(out / "candidate.jsonl"),
        )
        collect_draft_reports(
            self.draft_server.base_url,
            candidate,
            reference.header.request_defaults,
            CHAIN.max_tokens,
            out / "draft.jsonl",
            n_probs=6,
        )
        return SamplePair(reference, candidate, draft=read_samples(out / "draft.jsonl"))

    def close(self) -> None:
        self.draft_server.__exit__(None, None, None)
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


def zoo(profile: str = "quick") -> tuple[MutantSpec, ...]:
    """The engine level's zoo at `profile`: the served generation-level mutants (each must be rejected; what each
    models is its sequence-level spec's), then the valid rows. ValueError when `SERVED_MUTANTS` names something
    that is not a mutant of the sequence zoo."""

    def served(kind: str):
        return lambda: shared_reference(profile).pair(kind)

    specs = [by_name(SEQUENCE_ZOO, name) for name in SERVED_MUTANTS]
    not_mutants = [s.name for s in specs if not s.is_mutant]
    if not_mutants:
        raise ValueError(f"SERVED_MUTANTS names valid variants of the sequence zoo: {not_mutants}")
    return as_zoo(
        [mutant(s.name, s.models, served(s.name), s.expected) for s in specs]
        + [valid_variant(kind, what, served(kind), (verdict,)) for kind, what, verdict in VALID]
    )
