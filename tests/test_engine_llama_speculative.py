"""llama.cpp's examples/speculative served behind `/completion` (`serve.llama_speculative`): its debug log read as the
token ids it emitted (a token's text may hold a newline), a request's sampler chain as its flags or refused, and one
request answered end to end by a stand-in for the binary that prints the same log lines."""

from __future__ import annotations

import sys
import textwrap

import pytest

pytest.importorskip("httpx")  # the [engine] extra

from exactspec.conformance.engine.collect.client import SamplerChain  # noqa: E402
from exactspec.conformance.engine.serve.llama_speculative import (  # noqa: E402
    Example,
    RequestRefused,
    example_flags,
    parse_log,
)

#: Lines of a real run's debug log (`-lv 5`, SmolLM2 as its own draft, T = 0.7): the first token sampled, four drafts
#: accepted, one sampled, then drafts whose text is a newline.
LOG = """0.00.943.588 D the sampled target token (351, ' with') did not match, or we ran out of drafted tokens
0.01.044.641 D r = 0.663836, p_dft = 0.836242, p_tgt = 0.836242
0.01.044.643 D draft token 0 of sequence 0 (253, ' a') accepted
0.01.044.728 D draft token 1 of sequence 0 (2365, ' quick') accepted
0.01.044.750 D draft token 2 of sequence 0 (99, ' x') rejected
0.01.044.945 D the sampled target token (30, '.') did not match, or we ran out of drafted tokens
0.01.147.036 D draft token 0 of sequence 0 (198, '
') accepted
0.01.158.691 I n_drafted = 8
0.01.158.691 I n_accept  = 3
"""


def test_the_log_gives_the_emitted_ids_in_order_and_the_draft_counters():
    run = parse_log(LOG)
    assert run.tokens == (351, 253, 2365, 30, 198)  # the rejected draft 99 is not emitted
    assert (run.drafted, run.accepted) == (8, 3)


def test_the_chain_becomes_the_examples_flags_and_what_it_cannot_take_is_refused():
    body = SamplerChain(temperature=0.7, top_k=40, max_tokens=8).request()
    flags = example_flags(body)
    assert flags[flags.index("--temp") + 1] == "0.7" and flags[flags.index("--top-k") + 1] == "40"
    assert flags[flags.index("--samplers") + 1] == "top_k;top_p;min_p;temperature"
    # the collector's pinned stages are passed on
    assert flags[flags.index("--repeat-penalty") + 1] == "1.0"
    for change, field in (
        ({"n_probs": 5}, "n_probs"),
        ({"grammar": "x"}, "grammar"),
        ({"stop": ["\n"]}, "stop"),
        ({"min_keep": 3}, "min_keep"),
    ):
        with pytest.raises(RequestRefused, match=field):
            example_flags({**body, **change})


def test_a_request_is_answered_with_the_first_n_predict_tokens_and_the_draft_counters(tmp_path):
    fake = tmp_path / "llama-speculative"
    fake.write_text(
        textwrap.dedent(f"""\
        #!{sys.executable}
        import sys
        args = sys.argv[1:]
        assert args[args.index("-s") + 1] == "7" and args[args.index("-p") + 1] == "The quick"
        sys.stderr.write({LOG!r})
        """)
    )
    fake.chmod(0o755)
    example = Example(fake, tmp_path / "target.gguf", tmp_path / "draft.gguf", "http://127.0.0.1:9")
    # the reference's decoding, checked to tokenize back
    example.prompt_text = lambda ids: "The quick"
    answer = example.complete(
        {**SamplerChain(temperature=0.7, max_tokens=4).request(), "prompt": [504, 2365], "seed": 7}
    )
    assert answer["tokens"] == [351, 253, 2365, 30] and answer["stop_type"] == "limit"
    assert answer["timings"]["draft_n"] == 8 and answer["timings"]["draft_n_accepted"] == 3
    with pytest.raises(RequestRefused, match="prompt"):
        example.complete({"prompt": []})
