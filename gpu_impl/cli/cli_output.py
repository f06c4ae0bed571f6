"""What `exactspec generate` prints: streamed text, per-row text, the closing figures, the --json document.

Text goes to stdout (or --output); the figures go to stderr as lines starting with '#', so a pipe gets only
the text. With --json, stdout holds one JSON object (see `json_document`) and nothing else.
"""

from __future__ import annotations

import json
import statistics
from typing import Any, TextIO

from ... import __version__

JSON_SCHEMA = "exactspec.generate/1"


class Streamer:
    """Prints one row's decoded text as tokens arrive (re-decoding the whole sequence, so multi-byte tokens print whole)."""

    def __init__(self, tokenizer: Any, out: TextIO):
        self.tokenizer, self.out = tokenizer, out
        self.tokens: list[int] = []
        self.printed = ""

    def __call__(self, row: int, new_tokens: list[int]) -> None:
        self.tokens.extend(new_tokens)
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        if text.startswith(self.printed):
            delta = text[len(self.printed) :]
            if delta and not delta.endswith("\ufffd"):
                self.out.write(delta)
                self.out.flush()
                self.printed = text

    def finish(self, text: str) -> None:
        """Print what is left of the final `text` and end the line."""
        self.out.write(
            (text[len(self.printed) :] if text.startswith(self.printed) else "\n" + text) + "\n"
        )
        self.out.flush()


def write_texts(out: TextIO, texts: list[str]) -> None:
    """One text as is; several each after a '==> prompt i/n <==' line, in input order."""
    if len(texts) == 1:
        out.write(texts[0] + "\n")
    else:
        for i, text in enumerate(texts, 1):
            out.write(f"==> prompt {i}/{len(texts)} <==\n{text}\n")
    out.flush()


def decoding_speed(stats: Any) -> tuple[float, float]:
    """(tokens/s, seconds) of decoding, the one-time cost calibration excluded."""
    seconds = stats.wall_time_s - stats.calibration_time_s
    return (stats.new_tokens / seconds if seconds > 0 else float("nan")), seconds


def speculation_lines(stats: Any) -> list[str]:
    """What the drafts did: acceptance (examined drafts only), tokens per target call, timers."""
    per_pos = ", ".join(f"{a:.2f}" for a in stats.acceptance_rate_per_position)
    lines = [
        f"acceptance alpha: {stats.acceptance_rate:.3f} overall ({stats.accepted} of {stats.examined} examined drafts "
        f"accepted, {stats.proposed} proposed); per position: [{per_pos}]",
        f"tokens per target call: {stats.tokens_per_target_call:.2f} over {stats.rounds} rounds",
        f"time: draft {stats.draft_time_s:.2f} s, target {stats.target_time_s:.2f} s, wall {stats.wall_time_s:.2f} s",
    ]
    if stats.calibration_source:
        lines.append(
            f"cost calibration for --k-policy cost: {stats.calibration_time_s:.2f} s ({stats.calibration_source}; "
            f"cached per machine, model and thread count; excluded from the speed below)"
        )
    if stats.policy_note:
        lines.append(stats.policy_note)
    return lines


def speed_line(stats: Any, rows: int) -> str:
    speed, seconds = decoding_speed(stats)
    per_row = f" over {rows} prompts" if rows > 1 else ""
    return f"speed: {speed:.1f} tokens/s ({stats.new_tokens} tokens{per_row} in {seconds:.2f} s)"


def plain_lines(pairs: list[tuple[Any, Any]]) -> list[str]:
    """Plain decoding's speed beside the speculative one.

    `pairs`: (speculative, plain) results run one after the other; the speedup is the median of the pairs'
    ratios (a single ~1 s pair moved by a burst on a shared CPU says little on its own)."""
    ratios = sorted(speedup(s, p) for s, p in pairs)
    speculative, plain = pairs[0]
    plain_speed, plain_s = decoding_speed(plain.stats)
    spread = (
        f" (median of {len(ratios)} interleaved pairs, {ratios[0]:.2f}-{ratios[-1]:.2f}x)"
        if len(ratios) > 1
        else ""
    )
    lines = [
        f"plain decoding: {plain_speed:.1f} tokens/s ({plain.stats.new_tokens} tokens in {plain_s:.2f} s); "
        f"speedup {statistics.median(ratios):.2f}x{spread}"
    ]
    return lines


def identical_line(greedy: bool, identical: bool) -> str:
    """Whether outputs that should be plain decoding's for the same seeds (greedy ones, or a deterministic
    draft's verified on plain's random stream) are."""
    outputs = (
        "greedy outputs"
        if greedy
        else "sampled outputs (a deterministic draft, verified on plain decoding's random stream)"
    )
    return f"{outputs} identical to plain decoding: {'yes' if identical else 'NO'}"


def speedup(speculative: Any, plain: Any) -> float:
    """Decoding speed of one result over another's (tokens/s ratio, calibration excluded)."""
    return decoding_speed(speculative.stats)[0] / decoding_speed(plain.stats)[0]


def fixed_lines(triples: list[tuple[Any, Any, Any]], k: int, policy: str) -> list[str]:
    """Fixed k's speedup beside the policy's, each the median over the same interleaved (policy, plain, fixed)
    runs, and the policy's as a share of fixed k's."""
    policy_speedup = statistics.median(speedup(s, p) for s, p, _ in triples)
    fixed_speedup = statistics.median(speedup(f, p) for _, p, f in triples)
    return [
        f"fixed k = {k}: speedup {fixed_speedup:.2f}x over plain (median of {len(triples)}); --k-policy {policy}: "
        f"{policy_speedup:.2f}x, {policy_speedup / fixed_speedup:.2f} of fixed k's"
    ]


def print_figures(err: TextIO, lines: list[str]) -> None:
    err.write("".join(f"# {line}\n" for line in lines))
    err.flush()


def stats_record(stats: Any) -> dict:
    """A run's counters for --json, with its decoding speed."""
    speed, seconds = decoding_speed(stats)
    return {
        **stats.to_dict(),
        "decoding_time_s": seconds,
        "tokens_per_second": speed if speed == speed else None,
    }


def row_record(
    row: Any,
    text: str,
    tokens: list[int],
    prompt_tokens: int,
    eos_ids: frozenset[int],
    group: int,
    acceptance: dict | None = None,
) -> dict:
    """One prompt's entry in --json: its text and token ids, how it ended, the options it ran with, and its own
    drafts (`SpecStats.row_acceptance`; None under plain decoding)."""
    s = row.sampling
    return {
        "index": row.index,
        "id": row.id,
        "prompt": row.text,
        "text": text,
        "token_ids": tokens,
        "prompt_tokens": prompt_tokens,
        "new_tokens": len(tokens),
        "finish_reason": "eos" if tokens and tokens[-1] in eos_ids else "length",
        "seed": row.seed,
        "max_new_tokens": row.max_new_tokens,
        "sampling": {
            "temperature": s.temperature,
            "top_k": s.top_k,
            "top_p": s.top_p,
            "min_p": s.min_p,
        },
        "batch": group,
        "acceptance": acceptance,
    }


def json_document(header: dict, rows: list[dict], batches: list[dict], overall: dict) -> str:
    """The --json output: one object with the run's settings, `rows` in input order, per-batch and overall stats."""
    document = {
        "schema": JSON_SCHEMA,
        "exactspec_version": __version__,
        **header,
        "rows": rows,
        "batches": batches,
        "stats": overall,
    }
    return json.dumps(document, ensure_ascii=False, indent=1)
