"""Which request parameters change the sampled law, for llama.cpp and vLLM: one complete list.

Two sample files are comparable only when they sample one law, so the reference's and the candidate's
request defaults must agree on every parameter that can change it, and every record's request must agree
with its file's header. The list is complete by construction: a parameter is law-neutral only when it is
named in `REPORT_ONLY` (it changes what is reported or how, never which token is drawn); every other
parameter, known (`LLAMA_CPP_LAW`, `VLLM_LAW`) or not, is treated as law-changing.
"""

from __future__ import annotations

from typing import Any, Mapping

#: llama.cpp's `/completion` parameters that change the sampled law (server tools/server/README.md).
LLAMA_CPP_LAW = (
    "temperature",
    "dynatemp_range",
    "dynatemp_exponent",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "top_n_sigma",
    "xtc_probability",
    "xtc_threshold",
    "repeat_penalty",
    "repeat_last_n",
    "presence_penalty",
    "frequency_penalty",
    "penalize_nl",
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_penalty_last_n",
    "dry_sequence_breakers",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "adaptive_target",
    "min_keep",
    "samplers",
    "logit_bias",
    "grammar",
    "json_schema",
    "ignore_eos",
    "stop",
    "n_predict",
    "max_tokens",
    "n_keep",
    "n_indent",
    "t_max_predict_ms",
)
#: vLLM's OpenAI-server sampling parameters that change the sampled law (vllm.SamplingParams and the
#: OpenAI extensions).
VLLM_LAW = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "logit_bias",
    "allowed_token_ids",
    "bad_words",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "max_tokens",
    "min_tokens",
    "logits_processors",
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "structured_outputs",
    "response_format",
    "n",
    "best_of",
    "use_beam_search",
    "length_penalty",
    "truncate_prompt_tokens",
    "add_special_tokens",
)
#: Parameters that change only what is reported or how the reply travels, never the token drawn; the
#: per-request speculation settings are what is being certified, so an exact engine's law does not depend on them.
REPORT_ONLY = frozenset(
    {
        "n_probs",
        "post_sampling_probs",
        "logprobs",
        "top_logprobs",
        "prompt_logprobs",
        "return_tokens",
        "return_token_ids",
        "return_tokens_as_token_ids",
        "return_progress",
        "timings_per_token",
        "cache_prompt",
        "stream",
        "stream_options",
        "id_slot",
        "echo",
        "model",
        "seed",
        "prompt",
        "user",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "include_stop_str_in_output",
        "detokenize",
        "speculative.n_max",
        "speculative.n_min",
        "speculative.p_min",
    }
)
#: What a teacher-forcing request changes on purpose: it asks for one token after a given prefix.
TEACHER_FORCING = frozenset({"max_tokens", "n_predict"})


def law_changing(name: str) -> bool:
    """Does parameter `name` change the sampled law (every parameter not known to be report-only does)?"""
    return name not in REPORT_ONLY


def law_differences(
    first: Mapping[str, Any], second: Mapping[str, Any], ignore: frozenset[str] = frozenset()
) -> dict[str, tuple[Any, Any]]:
    """{parameter: (first's value, second's value)} for every law-changing parameter either one sets (a missing
    parameter is None) on which they differ, except those in `ignore`."""
    names = (set(first) | set(second)) - ignore
    return {
        name: (first.get(name), second.get(name))
        for name in sorted(names)
        if law_changing(name) and first.get(name) != second.get(name)
    }


def request_mismatch(
    request: Mapping[str, Any], defaults: Mapping[str, Any], ignore: frozenset[str] = frozenset()
) -> tuple[str, Any, Any] | None:
    """(parameter, request's value, header's value) of the first law-changing parameter a record's request sets
    differently from its header's request defaults, or None; parameters the request does not send are not
    judged (the header's defaults apply to them)."""
    for name in sorted(request):
        if (
            name not in ignore
            and law_changing(name)
            and name in defaults
            and request[name] != defaults[name]
        ):
            return name, request[name], defaults[name]
    for name in sorted(request):
        if name not in ignore and law_changing(name) and name not in defaults:
            return name, request[name], None
    return None
