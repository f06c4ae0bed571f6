"""The draft sources `exactspec generate --draft` offers: one table, one entry per source.

Each entry says how its ``--draft`` value is parsed (the text after ``name:``), how the choice is checked
against the target's shape read from its files (no weights loaded: errors come before the slow load), and
how the source is built from the loaded target. Adding a source is one entry in `DRAFTS`; the CLI takes
its choices and help text from here. Importing this module does not import torch (the builders import
their draft classes when called).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model_config import ModelShape, model_shape

EARLY_EXIT_DEFAULT_FRACTION = 0.5


@dataclass(frozen=True)
class DraftSpec:
    """A parsed ``--draft`` value: the source's name and its optional argument (a layer count or a path)."""

    kind: str
    n_layers: int | None = None
    path: str | None = None


@dataclass(frozen=True)
class BuildContext:
    """What a builder gets: the loaded target, its tokenizer, and where and how to run the draft."""

    target: Any
    tokenizer: Any
    device: str
    dtype: Any
    cpu_matmul: str = "auto"


@dataclass(frozen=True)
class DraftEntry:
    """One draft source. `parse` gets the text after ``name:`` (None without a colon)."""

    name: str
    form: str  # as the help shows it, e.g. "early-exit[:N]"
    summary: str
    parse: Callable[[str | None], DraftSpec]
    # ValueError naming --draft; no weights loaded
    validate: Callable[[DraftSpec, ModelShape], None]
    # -> (DraftSource or None, one-line description)
    build: Callable[[DraftSpec, BuildContext], tuple[Any, str]]


# --------------------------------------------------------------------------------------------------------
# Argument parsers and checks shared by entries
# --------------------------------------------------------------------------------------------------------


def no_argument(name: str) -> Callable[[str | None], DraftSpec]:
    def parse(argument: str | None) -> DraftSpec:
        if argument is not None:
            raise ValueError(f"--draft {name} takes no argument, got {name}:{argument}")
        return DraftSpec(name)

    return parse


def _layers(argument: str | None) -> DraftSpec:
    if argument is None:
        return DraftSpec("early-exit")
    if not argument.isdigit() or int(argument) < 1:
        raise ValueError(f"--draft early-exit:N needs a number of layers N >= 1, got {argument!r}")
    return DraftSpec("early-exit", n_layers=int(argument))


def _model_path(argument: str | None) -> DraftSpec:
    if not argument:
        raise ValueError("--draft model:PATH needs a path to a local model directory or .gguf file")
    return DraftSpec("model", path=argument)


def _nothing_to_check(spec: DraftSpec, target: ModelShape) -> None:
    """For sources that need nothing of the target beyond what every model has."""


def early_exit_layers(spec: DraftSpec, total: int) -> int:
    """The draft's layer count: N from ``early-exit:N``, else half the target's; ValueError unless 1 <= N < total."""
    n = (
        spec.n_layers
        if spec.n_layers is not None
        else max(1, int(total * EARLY_EXIT_DEFAULT_FRACTION))
    )
    if not 1 <= n < total:
        raise ValueError(
            f"--draft early-exit:N needs 1 <= N < {total} (the target's number of layers), got {n}"
        )
    return n


def _check_early_exit(spec: DraftSpec, target: ModelShape) -> None:
    if target.n_layers is not None:
        early_exit_layers(spec, target.n_layers)


def _check_model_draft(spec: DraftSpec, target: ModelShape) -> None:
    """The draft model's files exist and, where both configs say, its vocabulary is the target's."""
    draft = model_shape(spec.path)
    if None not in (draft.vocab_size, target.vocab_size) and draft.vocab_size != target.vocab_size:
        raise ValueError(
            f"--draft model:{spec.path}: its vocabulary has {draft.vocab_size} tokens, the target's "
            f"{target.vocab_size}; a draft model must share the target's vocabulary"
        )


# --------------------------------------------------------------------------------------------------------
# Builders (import torch-backed code only when called)
# --------------------------------------------------------------------------------------------------------


def _build_none(spec: DraftSpec, context: BuildContext) -> tuple[Any, str]:
    return None, "none (plain decoding)"


def _build_prompt_lookup(spec: DraftSpec, context: BuildContext) -> tuple[Any, str]:
    # torch: the registry is read by `generate --help` without it
    from .prompt_lookup import PromptLookupDraft

    return PromptLookupDraft(ngram_max=3), "prompt lookup (n-grams up to 3)"


def _build_self_int8(spec: DraftSpec, context: BuildContext) -> tuple[Any, str]:
    # torch: the registry is read by `generate --help` without it
    from .quantized import QuantizedSelfDraft

    on_cpu = str(context.device).startswith("cpu")
    draft = QuantizedSelfDraft(
        context.target, backend="dynamic" if on_cpu else "int8", cpu_matmul=context.cpu_matmul
    )
    return (
        draft,
        f"int8 self-draft ({'torch dynamic quantisation' if on_cpu else 'weight-only int8'})",
    )


def _build_early_exit(spec: DraftSpec, context: BuildContext) -> tuple[Any, str]:
    # torch: the registry is read by `generate --help` without it
    from .early_exit import EarlyExitDraft

    total = int(context.target.config.num_hidden_layers)
    n = early_exit_layers(spec, total)
    return EarlyExitDraft(
        context.target, n, cpu_matmul=context.cpu_matmul
    ), f"early exit after {n} of {total} layers"


def _build_model(spec: DraftSpec, context: BuildContext) -> tuple[Any, str]:
    # torch: the registry is read by `generate --help` without it
    from .. import models
    from ..loop.vocab import check_same_vocabulary
    from .model_draft import ModelDraft

    draft_model, draft_tokenizer = models.load_model(
        spec.path, device=context.device, dtype=context.dtype
    )
    check_same_vocabulary(context.target, draft_model, context.tokenizer, draft_tokenizer)
    return ModelDraft(draft_model, draft_tokenizer, context.cpu_matmul), f"model {spec.path}"


def _heads_path(argument: str | None) -> DraftSpec:
    if argument is not None and not argument:
        raise ValueError(
            "--draft heads:PATH needs the path of a heads .safetensors file (or use plain --draft heads)"
        )
    return DraftSpec("heads", path=argument)


def _build_heads(spec: DraftSpec, context: BuildContext) -> tuple[Any, str]:
    # torch: the registry is read by `generate --help` without it
    from .heads import HeadsDraft, default_heads_path, load_heads

    path = spec.path or default_heads_path(context.target)
    heads = load_heads(path, context.target)
    return HeadsDraft(context.target, heads), f"{heads.n_heads} prediction heads ({path})"


DRAFTS: tuple[DraftEntry, ...] = (
    DraftEntry(
        "prompt-lookup",
        "prompt-lookup",
        "continue an earlier n-gram of the context (no model)",
        no_argument("prompt-lookup"),
        _nothing_to_check,
        _build_prompt_lookup,
    ),
    DraftEntry(
        "self-int8",
        "self-int8",
        "int8-quantised copy of the target",
        no_argument("self-int8"),
        _nothing_to_check,
        _build_self_int8,
    ),
    DraftEntry(
        "early-exit",
        "early-exit[:N]",
        "the target's first N layers (default half)",
        _layers,
        _check_early_exit,
        _build_early_exit,
    ),
    DraftEntry(
        "model",
        "model:PATH",
        "a separate model with the same vocabulary",
        _model_path,
        _check_model_draft,
        _build_model,
    ),
    DraftEntry(
        "heads",
        "heads[:PATH]",
        "prediction heads on the target's last hidden state, trained by "
        "`exactspec train-heads` (default: the ones it saved for this target)",
        _heads_path,
        _nothing_to_check,
        _build_heads,
    ),
    DraftEntry(
        "none", "none", "plain decoding", no_argument("none"), _nothing_to_check, _build_none
    ),
)
_BY_NAME = {entry.name: entry for entry in DRAFTS}
DRAFT_CHOICES = " | ".join(entry.form for entry in DRAFTS)


def draft_help() -> str:
    """One sentence per source, for --help."""
    return "; ".join(f"{entry.form}: {entry.summary}" for entry in DRAFTS)


def entry_for(spec: DraftSpec) -> DraftEntry:
    if spec.kind not in _BY_NAME:
        raise ValueError(f"unknown draft kind {spec.kind!r}; known: {DRAFT_CHOICES}")
    return _BY_NAME[spec.kind]


def parse_draft(text: str) -> DraftSpec:
    """Parse a --draft value; ValueError with the accepted forms on anything else."""
    name, colon, argument = text.strip().partition(":")
    if name not in _BY_NAME:
        raise ValueError(f"--draft must be one of {DRAFT_CHOICES}, got {text!r}")
    return _BY_NAME[name].parse(argument if colon else None)


def validate_draft(spec: DraftSpec, target: ModelShape) -> None:
    """Check `spec` against the target's shape (from its files) before anything loads; ValueError naming --draft."""
    entry_for(spec).validate(spec, target)


def build_draft(
    spec: DraftSpec, target: Any, tokenizer: Any, device: str, dtype: Any, cpu_matmul: str = "auto"
) -> tuple[Any, str]:
    """The DraftSource for `spec` (None for plain decoding) and a one-line description."""
    return entry_for(spec).build(spec, BuildContext(target, tokenizer, device, dtype, cpu_matmul))
