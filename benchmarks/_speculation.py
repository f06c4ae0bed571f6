"""Draft sources by name, transformers' equivalent assisted-generation settings, the counters read back
from runs (pooled with `SpecStats.pooled`) and the walltime model they imply (bench_smollm2), and one
prompt-lookup run per contender, "plain", "cost" or "k<N>" (bench_cost_policy, bench_dtypes,
bench_policy_seeds)."""

from __future__ import annotations

from typing import Any

from exactspec.gpu_impl.loop.stats import SpecStats
from exactspec.reference.speedup import (
    expected_tokens,
    expected_tokens_per_position,
    improvement_factor,
)


def make_draft(name: str, model: Any, cache: dict[Any, Any], cpu_matmul: str = "auto") -> Any:
    """Draft sources by name and CPU kernel plan (model-backed drafts built once and reused)."""
    from exactspec.gpu_impl.drafts import (
        EarlyExitDraft,
        ModelDraft,
        PromptLookupDraft,
        QuantizedSelfDraft,
    )

    key = (name, cpu_matmul)
    if key not in cache:
        if name == "prompt-lookup":
            cache[key] = PromptLookupDraft(ngram_max=3)
        elif name == "int8-dynamic":
            cache[key] = QuantizedSelfDraft(model, backend="dynamic", cpu_matmul=cpu_matmul)
        elif name == "int8-weight-only":
            cache[key] = QuantizedSelfDraft(model, backend="int8", cpu_matmul=cpu_matmul)
        elif name.startswith("early-exit:"):
            cache[key] = EarlyExitDraft(model, int(name.split(":")[1]), cpu_matmul=cpu_matmul)
        elif name == "tiny-random":
            from exactspec.gpu_impl.models import tiny_llama

            small = tiny_llama(
                vocab_size=model.config.vocab_size, hidden_size=64, n_layers=2, seed=0
            )
            cache[key] = ModelDraft(small, cpu_matmul=cpu_matmul)
        else:
            raise ValueError(name)
    return cache[key]


def lookup_run(
    model: Any,
    ids: Any,
    tokens: int,
    sampling: Any,
    contender: str,
    seed: int,
    eos_token_id: Any = None,
) -> Any:
    """One run of `contender` ("plain": `generate_plain`; "cost": the CLI's default policy and k; "k<N>": fixed k = N)
    with a fresh prompt-lookup draft (n-grams up to 3) and a fresh generator, as each CLI call has."""
    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
    from exactspec.gpu_impl.cli.cli_args import DEFAULT_K
    from exactspec.gpu_impl.drafts import PromptLookupDraft

    if contender == "plain":
        return generate_plain(
            model, ids, tokens, sampling=sampling, seed=seed, eos_token_id=eos_token_id
        )
    policy, k = (
        ("cost", DEFAULT_K) if contender == "cost" else ("fixed", int(contender.removeprefix("k")))
    )
    generator = SpeculativeGenerator(
        model, PromptLookupDraft(ngram_max=3), k=k, sampling=sampling, adaptive_k=policy
    )
    return generator.generate(ids, tokens, seed=seed, eos_token_id=eos_token_id)


def run_seconds(result: Any) -> float:
    """A run's wall time without its cost calibration (once per machine and model), as the CLI reports it."""
    return result.stats.wall_time_s - result.stats.calibration_time_s


def draft_model_of(draft: Any) -> Any | None:
    return getattr(draft, "model", None)


def hf_assisted_kwargs(name: str, draft: Any, k: int) -> dict[str, Any] | None:
    """transformers' assisted-generation kwargs for the same draft, or None where generate has no equivalent."""
    if name == "prompt-lookup":
        return {"prompt_lookup_num_tokens": k}
    if name.startswith("early-exit:"):
        return {"assistant_early_exit": int(name.split(":")[1]), "num_assistant_tokens": k}
    model = draft_model_of(draft)
    if model is None:
        return None
    gc = model.generation_config
    gc.num_assistant_tokens = k
    gc.num_assistant_tokens_schedule = "constant"
    gc.assistant_confidence_threshold = 0.0
    return {"assistant_model": model}


def summarise_stats(results: list[Any]) -> dict[str, Any]:
    """Pool the counters of several runs (`SpecStats.pooled`): acceptance rates, tokens per target call, timers.

    The JSON keys stay "alpha" / "alpha_per_position" so that the stored results keep one format.
    "alpha" is accepted / examined drafts (the estimate the iid model E[N] = (1 - a^(k+1)) / (1 - a)
    needs); accepted / proposed also counts the drafts after a rejection, never examined, apart.
    """
    pooled = SpecStats.pooled(r.stats for r in results)
    rounds = pooled.rounds
    return {
        "alpha": pooled.acceptance_rate,
        "accepted_fraction": pooled.accepted / pooled.proposed if pooled.proposed else 0.0,
        "alpha_per_position": pooled.acceptance_rate_per_position,
        "tokens_per_target_call": pooled.tokens_per_target_call,
        "rounds": rounds,
        "draft_time_per_round_s": pooled.draft_time_s / max(1, rounds),
        "target_time_per_round_s": pooled.target_time_s / max(1, rounds),
        "per_run": [r.stats.to_dict() for r in results],
    }


def cost_model(
    acceptance_rate: float,
    k: int,
    c: float,
    v: float,
    tpc: float,
    acceptance_rate_per_position: list | None = None,
) -> dict[str, float]:
    """E[N] / (c k + v(k+1)) with E[N] from the pooled acceptance rate, and the same per position / from measured E[N]."""
    rate = min(max(acceptance_rate, 0.0), 1.0)
    c = max(c, 0.0)
    out = {
        "E_N": expected_tokens(rate, k),
        "predicted_speedup": improvement_factor(rate, k, c, {k + 1: v}),
        "predicted_speedup_from_measured_tokens_per_call": tpc / (c * k + v),
    }
    if acceptance_rate_per_position and len(acceptance_rate_per_position) >= k:
        rates = [0.0 if a is None else a for a in acceptance_rate_per_position[:k]]
        out["E_N_per_position"] = expected_tokens_per_position(rates)
        out["predicted_speedup_per_position"] = out["E_N_per_position"] / (c * k + v)
    return out


# ----------------------------------------------------------------------------------------------------------
