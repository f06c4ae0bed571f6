"""The prediction-heads draft: training runs and learns, save -> load -> draft round-trips, the generator hands the
heads the right hidden state, and generation with heads keeps the target's law (chi-square, alpha = 1e-3 each)."""

import numpy as np
import pytest
import torch

from exactspec.cli import main as exactspec_main
from exactspec.gpu_impl import SpeculativeGenerator, generate_plain
from exactspec.gpu_impl.drafts import HeadsDraft
from exactspec.gpu_impl.drafts.heads import (
    PredictionHeads,
    default_heads_path,
    load_heads,
    save_heads,
)
from exactspec.gpu_impl.heads.heads_training import (
    TrainConfig,
    collect_states,
    split_rows,
    train_heads,
)
from exactspec.gpu_impl.models import tiny_llama
from exactspec.reference.warping import SamplingParams
from tests.test_gpu_law import ALPHA, PROMPT, VOCAB, chi_square_pvalue, joint_two_token_law
from tests.tiny_models import scaled_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _periodic_windows(vocab: int, n: int = 24, length: int = 19) -> torch.Tensor:
    """Windows of a repeating pattern (x_{t+1} = x_t + 3 mod V), so heads can learn something in a few steps."""
    starts = torch.randint(0, vocab, (n, 1), generator=torch.Generator().manual_seed(0))
    return (starts + 3 * torch.arange(length)[None, :]) % vocab


@pytest.fixture(scope="module")
def trained():
    """A tiny target, heads trained on it for a few steps, and the training report."""
    target = tiny_llama(vocab_size=64, hidden_size=64, n_layers=2, seed=0)
    ids = _periodic_windows(64)
    states = collect_states(target, ids)
    train_rows, held_rows = split_rows(ids.shape[0], 0.25, seed=0)
    heads, report = train_heads(
        target,
        (ids[train_rows], states[train_rows]),
        (ids[held_rows], states[held_rows]),
        TrainConfig(n_heads=3, steps=60, batch=4, learning_rate=5e-3),
        progress=False,
    )
    return target, heads, report


def test_training_lowers_held_out_kl(trained):
    _, _, report = trained
    before, after = report["held_out_before"]["kl"], report["held_out_after"]["kl"]
    assert report["steps_run"] == 60
    assert all(a < 0.8 * b for a, b in zip(after, before)), (before, after)


def test_save_load_draft_round_trip(trained, tmp_path):
    target, heads, _ = trained
    path = save_heads(heads, tmp_path / "heads.safetensors", target, {"note": "test"})
    loaded = load_heads(path, target)
    assert loaded.info == {"note": "test"}
    for name, tensor in heads.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name]), name
    prompt = _periodic_windows(64, n=2, length=9)
    runs = [
        SpeculativeGenerator(
            target, HeadsDraft(target, h), k=3, sampling=SamplingParams(0.8)
        ).generate(prompt, 12, seed=4)
        for h in (heads, loaded)
    ]
    assert runs[0].sequences == runs[1].sequences
    assert runs[0].stats.proposed > 0


def test_load_errors_name_the_problem(trained, tmp_path):
    target, heads, _ = trained
    with pytest.raises(ValueError, match="exactspec train-heads"):
        load_heads(tmp_path / "missing.safetensors", target)
    path = save_heads(heads, tmp_path / "heads.safetensors", target)
    with pytest.raises(ValueError, match="trained for target"):
        load_heads(path, tiny_llama(vocab_size=64, hidden_size=64, n_layers=2, seed=1))
    with pytest.raises(ValueError, match="do not fit"):
        HeadsDraft(target, PredictionHeads(32, 2))


class _Recorder(HeadsDraft):
    """Records (hidden state, pending token, tokens emitted so far per row) at every proposal."""

    def reset(self, input_ids, valid, vocab_size):
        super().reset(input_ids, valid, vocab_size)
        self.seen, self.emitted_total = [], [0] * input_ids.shape[0]

    def propose(self, k, sampling, generators):
        if self.hidden is not None:
            self.seen.append((self.hidden.clone(), self.pending.clone(), list(self.emitted_total)))
        return super().propose(k, sampling, generators)

    def accept(self, tokens, counts, emitted):
        super().accept(tokens, counts, emitted)
        self.emitted_total = [n + len(row) for n, row in zip(self.emitted_total, emitted)]


def test_heads_read_the_state_that_produced_the_pending_token(trained):
    """At every round and row the hidden state handed over is the target's final-norm state at the position just
    before the pending token, as one fresh forward of the whole context computes it (ragged batch, left padding)."""
    target, heads, _ = trained
    draft = _Recorder(target, heads)
    prompt = torch.tensor([[0, 0, 5, 8, 11, 14], [4, 9, 2, 7, 1, 3]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    result = SpeculativeGenerator(target, draft, k=3, sampling=SamplingParams(1.0)).generate(
        prompt, 12, seed=2, attention_mask=mask
    )
    checked = 0
    for row in range(2):
        context = prompt[row][mask[row].bool()].tolist() + result.sequences[row]
        with torch.no_grad():
            states = target.get_decoder()(input_ids=torch.tensor([context])).last_hidden_state[0]
        for hidden, pending, emitted_total in draft.seen:
            # index of the pending token in `context`
            position = int(mask[row].sum()) - 1 + emitted_total[row]
            if position < len(context):
                assert int(pending[row]) == context[position]
                torch.testing.assert_close(hidden[row], states[position - 1], atol=1e-4, rtol=1e-4)
                checked += 1
    assert checked >= 6


def test_greedy_heads_match_plain_decoding(trained):
    target, heads, _ = trained
    prompt = _periodic_windows(64, n=3, length=7)
    plain = generate_plain(target, prompt, 16, SamplingParams(0.0)).sequences
    for policy in ("fixed", "grow-shrink"):
        spec = SpeculativeGenerator(
            target, HeadsDraft(target, heads), k=3, sampling=SamplingParams(0.0), adaptive_k=policy
        ).generate(prompt, 16)
        assert spec.sequences == plain
        # the trained heads do get drafts accepted on the pattern they learnt
        assert spec.stats.accepted > 0


@pytest.fixture(scope="module")
def law_target_heads():
    target = scaled_llama(0, layers=2, hidden=32, vocab=VOCAB, scale=8)
    ids = torch.randint(0, VOCAB, (16, 12), generator=torch.Generator().manual_seed(1))
    states = collect_states(target, ids)
    heads, _ = train_heads(
        target,
        (ids[:12], states[:12]),
        (ids[12:], states[12:]),
        TrainConfig(n_heads=3, steps=20, batch=4),
        progress=False,
    )
    return target, heads


@pytest.mark.parametrize(
    "sampling",
    [SamplingParams(1.0), SamplingParams(0.9, top_k=6, top_p=0.9, min_p=0.05)],
    ids=["plain_T1", "filtered"],
)
@pytest.mark.parametrize("k", [1, 3])
def test_first_two_tokens_follow_target_law(law_target_heads, sampling, k):
    """n = 6000 rows; chi-square on the (V x V) joint law of two tokens and on the first token's law, alpha = 1e-3
    each: power to detect a heads draft whose q were not the ones its tokens came from is shown by the same test in
    test_gpu_law for the model draft."""
    target, heads = law_target_heads
    out = SpeculativeGenerator(target, HeadsDraft(target, heads), k=k, sampling=sampling).generate(
        PROMPT.expand(6000, -1), 2, seed=1000
    )
    assert out.stats.proposed > 0
    law = joint_two_token_law(target, sampling)
    pairs = np.array(out.sequences)
    observed = np.bincount(pairs[:, 0] * VOCAB + pairs[:, 1], minlength=VOCAB * VOCAB).astype(float)
    assert chi_square_pvalue(observed, law.ravel()) > ALPHA
    assert (
        chi_square_pvalue(np.bincount(pairs[:, 0], minlength=VOCAB).astype(float), law.sum(1))
        > ALPHA
    )


def test_train_command_then_generate_with_heads(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    generate = [
        "generate",
        "hello",
        "--tiny",
        "--draft",
        "heads",
        "--max-new-tokens",
        "6",
        "-k",
        "2",
        "--k-policy",
        "fixed",
        "--temperature",
        "0",
        "--no-stream",
    ]
    assert exactspec_main(generate) == 2
    assert "exactspec train-heads" in capsys.readouterr().err
    assert exactspec_main(["train-heads", "--tiny", "--steps", "3", "--window", "8"]) == 0
    assert default_heads_path(
        tiny_llama(vocab_size=64, hidden_size=64, n_layers=4, seed=0)
    ).is_file()
    assert exactspec_main(generate) == 0
    assert "prediction heads" in capsys.readouterr().err
