"""exactspec's early-exit self-draft: the first N blocks of the target (its embedding, final norm and head kept), a
draft that really disagrees with the target, written for the engines that load it.

An engine certified with a draft equal to its target accepts nearly every draft, so the rejection rule and its
residual are barely exercised. The self-draft keeps the target's vocabulary and tokenizer (every engine accepts
it as a draft of that target) but stops after N of its blocks, so a good share of drafts is rejected.

* `early_exit_gguf(source, blocks, out)`: a GGUF for llama.cpp (``-md``), written with the ``gguf`` package: every
  metadata field copied, ``<arch>.block_count`` set to N, the tensors of blocks >= N dropped, the others copied
  as they are (quantised types included).
* `early_exit_hf_dir(source, blocks, out)`: a Hugging Face directory for vLLM (``--speculative-config
  {"model": DIR}``): ``num_hidden_layers`` N in config.json, the safetensors of layers >= N dropped, tokenizer
  and generation config copied.
* `self_draft(blocks)`: both, for the embedded SmolLM2, cached under ``<cache>/models/``.

Torch-free (numpy, gguf, safetensors' numpy API).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from ....cache import content_hash, models_dir
from ....gpu_impl.model_config import default_gguf_path

DEFAULT_BLOCKS = (
    24  # of SmolLM2-135M's 30: acceptance ~0.4 at T = 0.7 on a chat prompt (6 blocks: ~0)
)
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")
_BLOCK = re.compile(r"^blk\.(\d+)\.")


def _check_blocks(blocks: int, available: int) -> None:
    if isinstance(blocks, bool) or not isinstance(blocks, int) or not 1 <= blocks < available:
        raise ValueError(
            f"blocks must be an integer in [1, {available - 1}] (the source has {available}), got {blocks!r}"
        )


def early_exit_gguf(source: str | os.PathLike, blocks: int, out: str | os.PathLike) -> Path:
    """Write the first `blocks` blocks of the GGUF `source` as the GGUF `out` (atomically); -> `out`."""
    # gguf: only building the GGUF self-draft needs it
    import gguf

    reader = gguf.GGUFReader(str(source))
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    count_key = f"{arch}.block_count"
    _check_blocks(blocks, int(reader.fields[count_key].contents()))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), arch=arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # written by GGUFWriter itself
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        value = blocks if field.name == count_key else field.contents()
        if field.name == gguf.Keys.General.NAME:
            value = f"{value} (early exit after {blocks} blocks)"
        writer.add_key_value(field.name, value, value_type, sub_type=sub_type)
    kept = [
        t for t in reader.tensors if not ((m := _BLOCK.match(t.name)) and int(m.group(1)) >= blocks)
    ]
    for tensor in kept:
        writer.add_tensor_info(
            tensor.name,
            tensor.data.shape,
            tensor.data.dtype,
            tensor.data.nbytes,
            tensor.tensor_type,
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in kept:
        writer.write_tensor_data(tensor.data)
    writer.close()
    os.replace(tmp, out)
    return out


def early_exit_hf_dir(source: str | os.PathLike, blocks: int, out: str | os.PathLike) -> Path:
    """Write the first `blocks` layers of the Hugging Face directory `source` as the directory `out`; -> `out`."""
    # safetensors: only building the Hugging Face self-draft needs it
    from safetensors.numpy import load_file, save_file

    source, out = Path(source), Path(out)
    config = json.loads((source / "config.json").read_text())
    _check_blocks(blocks, int(config["num_hidden_layers"]))
    weights = sorted(source.glob("*.safetensors"))
    if not weights:
        raise ValueError(f"source: {source} holds no .safetensors file")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".tmp-", dir=out.parent))
    try:
        for path in weights:
            tensors = {
                name: array
                for name, array in load_file(str(path)).items()
                if not ((m := _LAYER.match(name)) and int(m.group(1)) >= blocks)
            }
            save_file(tensors, str(tmp / path.name), metadata={"format": "pt"})
        config.update(num_hidden_layers=blocks)
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        for extra in source.iterdir():
            if extra.is_file() and extra.suffix != ".safetensors" and extra.name != "config.json":
                shutil.copy2(extra, tmp / extra.name)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def self_draft(blocks: int = DEFAULT_BLOCKS) -> dict[str, Path]:
    """{"gguf": ..., "hf_dir": ...}: the embedded SmolLM2's early-exit self-draft, built once and cached."""
    # torch: `engine serve` starts without it
    from ....gpu_impl.models import (
        converted_checkpoint_dir,
    )

    gguf_source = default_gguf_path()
    root = (
        models_dir()
        / f"self-draft-{gguf_source.stem}-{content_hash(gguf_source)[:16]}-{blocks}blocks"
    )
    gguf_path, hf_dir = root / "draft.gguf", root / "hf"
    if not gguf_path.is_file():
        early_exit_gguf(gguf_source, blocks, gguf_path)
    if not (hf_dir / "config.json").is_file():
        early_exit_hf_dir(converted_checkpoint_dir(), blocks, hf_dir)
    return {"gguf": gguf_path, "hf_dir": hf_dir}


__all__ = ["DEFAULT_BLOCKS", "early_exit_gguf", "early_exit_hf_dir", "self_draft"]
