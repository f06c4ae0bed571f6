"""What a draft-free round costs: the speculative loop taking plain steps against the plain loop itself.

    python benchmarks/bench_draft_free.py [--repeats 7] [--max-new-tokens 64] [--families chat,code]

When the draft proposes nothing (prompt lookup without a match) or the cost policy picks k = 0, a round of
`SpeculativeGenerator` is one plain decoding step.  It should cost what `generate_plain`'s step costs, so
that a draft that cannot pay loses nothing to the loop around it.  Per prompt family (T = 0, SmolLM2-135M,
the chat template): `generate_plain` and a `SpeculativeGenerator` whose prompt-lookup draft can never match
(n-grams of 64 tokens), interleaved and rotated rep by rep; ratio = loop tokens/s over plain tokens/s in
the same repetition (median, min-max), with an A/A control (plain run twice).  Also the same for the cost
policy with the real draft on chat, the family where it mostly takes plain steps.  Writes
benchmarks/results/draft_free.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROMPTS, encode_prompt, log, spread, write_result  # noqa: E402

from exactspec.reference.warping import SamplingParams  # noqa: E402

GREEDY = SamplingParams(temperature=0.0)


def contenders(model: Any, ids: Any, n: int) -> dict[str, Callable[[], Any]]:
    """Plain decoding (twice), the loop with a draft that never proposes, and the cost policy's real run."""
    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
    from exactspec.gpu_impl.drafts import PromptLookupDraft

    def plain() -> Any:
        return generate_plain(model, ids, n, sampling=GREEDY)

    def never_drafts() -> Any:
        return SpeculativeGenerator(
            model, PromptLookupDraft(ngram_max=64, ngram_min=64), k=4, sampling=GREEDY
        ).generate(ids, n)

    def cost_policy() -> Any:
        return SpeculativeGenerator(
            model, PromptLookupDraft(ngram_max=3), k=4, sampling=GREEDY, adaptive_k="cost"
        ).generate(ids, n)

    return {
        "plain": plain,
        "draft_free_loop": never_drafts,
        "cost_policy": cost_policy,
        "plain_again": plain,
    }


def measure(runs: dict[str, Callable[[], Any]], repeats: int) -> dict[str, Any]:
    names = list(runs)
    rates: dict[str, list[float]] = {name: [] for name in names}
    proposed: list[int] = []
    for rep in range(repeats):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            result = runs[name]()
            rates[name].append(
                len(result.sequences[0])
                / (result.stats.wall_time_s - result.stats.calibration_time_s)
            )
            if name == "draft_free_loop":
                proposed.append(result.stats.proposed)
    ratio = lambda name: spread([r / p for p, r in zip(rates["plain"], rates[name])])
    return {
        "plain_tokens_per_s": spread(rates["plain"]),
        "draft_free_loop_over_plain": ratio("draft_free_loop"),
        "cost_policy_over_plain": ratio("cost_policy"),
        "plain_again_over_plain": ratio("plain_again"),
        "drafts_proposed_by_the_draft_free_loop": proposed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--families", default="chat,code")
    args = parser.parse_args(argv)
    from exactspec.gpu_impl.models import load_default_model

    model, tokenizer = load_default_model()
    payload: dict[str, Any] = {"args": vars(args), "families": {}}
    for family in args.families.split(","):
        row = measure(
            contenders(model, encode_prompt(tokenizer, PROMPTS[family]), args.max_new_tokens),
            args.repeats,
        )
        if any(row["drafts_proposed_by_the_draft_free_loop"]):
            raise RuntimeError(
                f"{family}: the draft-free loop proposed drafts; the measurement would mean nothing"
            )
        payload["families"][family] = row
        log(family, {k: round(v["median"], 3) for k, v in row.items() if isinstance(v, dict)})
        write_result("draft_free", payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
