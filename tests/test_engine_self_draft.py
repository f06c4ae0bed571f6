"""exactspec's early-exit self-draft (`conformance.engine.serve.self_draft`): the GGUF for llama.cpp, the Hugging Face
directory for vLLM, and (slow) a llama-server drafting with it: plain decoding reproduced at T = 0 while a good
share of drafts is rejected, which an identical draft never gives."""

from __future__ import annotations

import json

import pytest

from exactspec.conformance.engine.serve import self_draft as sd


def test_the_gguf_keeps_the_first_blocks_and_every_other_field(tmp_path):
    gguf = pytest.importorskip("gguf")
    from exactspec.gpu_impl.models import default_gguf_path

    source = default_gguf_path()
    out = sd.early_exit_gguf(source, 2, tmp_path / "draft.gguf")
    before, after = gguf.GGUFReader(str(source)), gguf.GGUFReader(str(out))
    assert int(after.fields["llama.block_count"].contents()) == 2
    blocks = {t.name.split(".")[1] for t in after.tensors if t.name.startswith("blk.")}
    assert blocks == {"0", "1"} and {"token_embd.weight", "output_norm.weight"} <= {
        t.name for t in after.tensors
    }
    kept = {t.name: t for t in before.tensors}
    for tensor in after.tensors:  # copied as they are, quantised types included
        assert (
            tensor.tensor_type == kept[tensor.name].tensor_type
            and (tensor.data == kept[tensor.name].data).all()
        )
    assert set(after.fields) == set(before.fields)
    assert (
        after.fields["tokenizer.ggml.tokens"].contents()
        == before.fields["tokenizer.ggml.tokens"].contents()
    )
    with pytest.raises(ValueError, match="blocks"):
        sd.early_exit_gguf(source, 30, tmp_path / "no.gguf")


def test_the_hf_directory_loads_as_the_first_layers_of_its_source(tmp_path):
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    from exactspec.gpu_impl.models import tiny_llama

    source = tmp_path / "target"
    tiny_llama(n_layers=3, seed=4).save_pretrained(str(source), safe_serialization=True)
    out = sd.early_exit_hf_dir(source, 1, tmp_path / "draft")
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 1
    draft = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    reference = AutoModelForCausalLM.from_pretrained(str(source), num_hidden_layers=1).eval()
    ids = torch.tensor([[1, 5, 9, 2]])
    with torch.no_grad():
        assert torch.equal(draft(ids).logits, reference(ids).logits)
    with pytest.raises(ValueError, match="blocks"):
        sd.early_exit_hf_dir(source, 0, tmp_path / "none")


@pytest.mark.slow
def test_llama_server_drafting_with_the_self_draft_rejects_often_and_stays_exact_at_t0():
    import httpx

    from exactspec.conformance.engine.serve.llama_server import LlamaServer, ensure_llama_server
    from tests.engine_fixtures import PINNED

    binary, draft = ensure_llama_server(), sd.self_draft()["gguf"]
    prompt = [1, 9690, 198, 2683, 359, 253, 1367, 314, 260, 3575, 282]
    drafted = accepted = 0
    with (
        LlamaServer(binary, mode="plain", threads=1) as plain,
        LlamaServer(binary, mode="draft", draft_model=draft, threads=1) as candidate,
    ):
        for seed in range(3):
            body = {
                "prompt": prompt,
                "n_predict": 24,
                "temperature": 0.0,
                "seed": seed,
                "return_tokens": True,
                **PINNED,
            }
            a = httpx.post(f"{plain.base_url}/completion", json=body, timeout=120).json()
            b = httpx.post(f"{candidate.base_url}/completion", json=body, timeout=120).json()
            assert a["tokens"] == b["tokens"]
            drafted += b["timings"].get("draft_n", 0)
            accepted += b["timings"].get("draft_n_accepted", 0)
    assert drafted > 0 and 0.05 < accepted / drafted < 0.9, (drafted, accepted)
