"""The sequence-level cases (their profile settings: `settings.py` beside this module).

Levels: ``exact`` (tiny V = 6 models, whole-sequence law enumerated), ``pit`` (any vocabulary: randomized
PIT of every generated token under the teacher-forced target law, two vocabulary orderings), ``greedy``
(temperature 0: token-for-token equality with plain greedy decoding of the target).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...reference.warping import SamplingParams
from ...stat_tests import plan_gof

PROMPT_A = (0, 2, 3, 4, 2, 3, 4, 2, 3)  # repeated n-grams, so prompt lookup finds drafts
PROMPT_B = (5, 1, 4, 1, 5, 2, 4, 1, 5)
PIT_PROMPT = (3, 17, 42, 3, 17, 42, 9, 3, 17)
TINY_EOS = 1
PIT_EOS = 5
REAL_PROMPT_TEXT = (
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. "
    "Once upon a time, in a small village by the sea, there lived"
)


@dataclass(frozen=True)
class Case:
    name: str
    level: str  # "exact" | "pit" | "greedy"
    sampling: SamplingParams
    k: int
    max_new_tokens: int
    models: str = "tiny"  # "tiny" (V=6) | "pit" (V=64) | "real" (SmolLM2-135M)
    eos: int | None = None
    batch: int = 1
    what: str = ""
    ks: tuple[int, ...] = ()  # greedy cases: every k in ks
    prompts: tuple[tuple[int, ...], ...] = field(default=(PROMPT_A,))
    in_quick: bool = True  # False: only in the standard and full profiles
    dtype: str = "float32"  # real models: the dtype the target (and its draft) run in; the reference uses the same

    def params(self) -> dict:
        s = self.sampling
        params = {
            "temperature": s.temperature,
            "top_k": s.top_k,
            "top_p": s.top_p,
            "min_p": s.min_p,
            "k": list(self.ks) if self.ks else self.k,
            "max_new_tokens": self.max_new_tokens,
            "models": self.models,
            "eos_token_id": self.eos,
            "batch": self.batch,
        }
        return {**params, "dtype": self.dtype} if self.models == "real" else params


SP = SamplingParams

CASES: list[Case] = [
    Case("t1.0_k2", "exact", SP(1.0), 2, 3, what="temperature 1"),
    Case("t0.7_k3", "exact", SP(0.7), 3, 3, what="temperature 0.7"),
    Case(
        "batch2_k3",
        "exact",
        SP(1.0),
        3,
        3,
        batch=2,
        prompts=(PROMPT_A, PROMPT_B),
        what="batch of 2 rows with different prompts (generate_batch)",
    ),
    Case(
        "eos_k4_n4", "exact", SP(1.0), 4, 4, eos=TINY_EOS, what="EOS inside drafts (EOS = token 1)"
    ),
    Case("topk3_k3", "exact", SP(1.0, top_k=3), 3, 3, what="top-k 3"),
    Case("t0.3_k2", "exact", SP(0.3), 2, 3, what="temperature 0.3 (peaked)"),
    Case("t1.5_k4", "exact", SP(1.5), 4, 3, what="temperature 1.5 (flat)"),
    Case("topp0.8_k3", "exact", SP(1.0, top_p=0.8), 3, 3, what="top-p 0.8"),
    Case("minp0.2_k2", "exact", SP(1.0, min_p=0.2), 2, 3, what="min-p 0.2"),
    Case(
        "combo_t0.8_k4_p0.9_m0.05_k3",
        "exact",
        SP(0.8, top_k=4, top_p=0.9, min_p=0.05),
        3,
        3,
        what="temperature + top-k + top-p + min-p",
    ),
    Case("k1_n3", "exact", SP(1.0), 1, 3, what="k = 1"),
    Case(
        "k8_n4",
        "exact",
        SP(0.9),
        8,
        4,
        what="k = 8 > max_new_tokens: the limit falls inside a draft",
    ),
    Case(
        "pit_t1.0_k4",
        "pit",
        SP(1.0),
        4,
        12,
        models="pit",
        prompts=(PIT_PROMPT,),
        what="V = 64, PIT",
    ),
    Case(
        "pit_t0.7_topk20_eos_k5",
        "pit",
        SP(0.7, top_k=20),
        5,
        12,
        models="pit",
        eos=PIT_EOS,
        prompts=(PIT_PROMPT,),
        what="V = 64, temperature 0.7 + top-k 20, EOS = token 5, PIT",
    ),
    Case(
        "greedy_tiny",
        "greedy",
        SP(0.0),
        0,
        6,
        ks=(1, 3, 8),
        prompts=(PROMPT_A, PROMPT_B),
        what="greedy == plain greedy, V = 6",
    ),
    Case(
        "greedy_v64",
        "greedy",
        SP(0.0),
        0,
        12,
        models="pit",
        ks=(1, 4, 8),
        prompts=(PIT_PROMPT,),
        what="greedy == plain greedy, V = 64",
    ),
]

REAL_CASES: list[Case] = [
    Case(
        "real_pit_t0.7_k4",
        "pit",
        SP(0.7),
        4,
        24,
        models="real",
        prompts=(),
        what="SmolLM2-135M, temperature 0.7, PIT",
    ),
    Case(
        "real_pit_t1.0_topk50_k3",
        "pit",
        SP(1.0, top_k=50),
        3,
        24,
        models="real",
        prompts=(),
        in_quick=False,
        what="SmolLM2-135M, top-k 50, PIT",
    ),
    Case(
        "real_greedy",
        "greedy",
        SP(0.0),
        0,
        16,
        models="real",
        ks=(4,),
        prompts=(),
        what="SmolLM2-135M greedy == plain greedy",
    ),
    # bfloat16 changes the target's law (the reference teacher-forces the same bfloat16 model), never the rule
    Case(
        "real_pit_t0.7_k4_bf16",
        "pit",
        SP(0.7),
        4,
        24,
        models="real",
        prompts=(),
        dtype="bfloat16",
        what="SmolLM2-135M in bfloat16, temperature 0.7, PIT",
    ),
    Case(
        "real_greedy_bf16",
        "greedy",
        SP(0.0),
        0,
        16,
        models="real",
        ks=(4,),
        prompts=(),
        dtype="bfloat16",
        what="SmolLM2-135M in bfloat16, greedy == plain greedy",
    ),
]


def planned_sequences(law_probs, settings, false_fail_rate: float, false_pass_rate: float) -> int:
    """Sequences an exact case needs: the largest n `stat_tests.plan_gof` plans over its rows' laws for the profile's
    target TV on the law pooled to <= settings.max_bins bins (likelihood-ratio test, proven tail), at least 200;
    never capped below the target."""
    return int(
        max(
            200,
            *(
                plan_gof(
                    p,
                    settings.target_tv,
                    false_fail_rate,
                    false_pass_rate,
                    tail="lr_bound",
                    max_bins=settings.max_bins,
                )[0]
                for p in law_probs
            ),
        )
    )
