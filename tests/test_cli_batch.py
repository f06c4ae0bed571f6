"""Batches from the CLI on the hidden --tiny model: several prompts, --prompts FILE / stdin, --json, --output.

Greedy decoding (temperature 0) under --k-policy fixed makes each row's tokens a function of its prompt
alone, so a row of a batch must equal the same prompt run by itself.
"""

from __future__ import annotations

import io
import json

from exactspec.gpu_impl.cli import cli

GREEDY = ["--tiny", "--temperature", "0", "--k-policy", "fixed", "--max-new-tokens", "6"]


def _run(capsys, *argv, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out, captured.err


def test_several_prompts_print_in_order_and_match_lone_runs(capsys):
    prompts = ["abc abc abc", "hello", "a much longer prompt than the others"]
    out, err = _run(capsys, *prompts, *GREEDY)
    blocks = out.split("==> prompt ")[1:]
    assert [block.split(" <==")[0] for block in blocks] == ["1/3", "2/3", "3/3"]
    texts = [block.split(" <==\n", 1)[1].rstrip("\n") for block in blocks]
    assert all(len(text) == 6 for text in texts)
    assert "3 prompts in 1 batch(es)" in err and "over 3 prompts" in err
    for prompt, text in zip(prompts, texts):
        alone, _ = _run(capsys, prompt, *GREEDY)
        assert alone.rstrip("\n") == text


def test_json_lines_file_gives_one_json_document(capsys, tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text(
        '{"prompt": "abc abc", "id": 7}\n{"prompt": "xyz", "max_new_tokens": 3}\n{"prompt": "hello"}\n'
    )
    out, _ = _run(capsys, "--prompts", str(path), "--json", *GREEDY, "--compare-plain")
    document = json.loads(out)
    rows = document["rows"]
    assert document["schema"] == "exactspec.generate/1" and document["k_policy"] == "fixed"
    assert [row["index"] for row in rows] == [0, 1, 2] and [row["id"] for row in rows] == [
        7,
        None,
        None,
    ]
    assert [row["new_tokens"] for row in rows] == [6, 3, 6]
    assert all(
        len(row["token_ids"]) == row["new_tokens"] and len(row["text"]) == row["new_tokens"]
        for row in rows
    )
    assert all(row["finish_reason"] == "length" for row in rows)
    assert sorted(i for batch in document["batches"] for i in batch["rows"]) == [0, 1, 2]
    assert len(document["batches"]) == 2  # max_new_tokens 3 runs apart
    assert all(batch["greedy_identical_to_plain"] for batch in document["batches"])
    assert all(
        len(batch["speedups"]) == 3 and min(batch["speedups"]) > 0 for batch in document["batches"]
    )
    # the policy is fixed already
    assert not any("fixed_k_speedups" in batch for batch in document["batches"])
    assert document["stats"]["new_tokens"] == 15
    # each row's own drafts; in each batch they add up to the batch's counters
    for row in rows:
        a = row["acceptance"]
        assert a["drafts_proposed"] >= a["drafts_examined"] >= a["drafts_accepted"] >= 0
        assert a["acceptance_rate"] == (
            a["drafts_accepted"] / a["drafts_examined"] if a["drafts_examined"] else 0.0
        )
    for batch in document["batches"]:
        mine = [rows[i]["acceptance"] for i in batch["rows"]]
        assert sum(a["drafts_proposed"] for a in mine) == batch["stats"]["proposed"]
        assert sum(a["drafts_accepted"] for a in mine) == batch["stats"]["accepted"]
    assert not any(key.startswith("rows_") for key in document["stats"])


def test_stdin_prompt_list_and_output_file(capsys, tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    out, err = _run(
        capsys,
        "--prompts",
        "-",
        "--json",
        "-o",
        str(target),
        *GREEDY,
        stdin="one\ntwo\n",
        monkeypatch=monkeypatch,
    )
    assert out == "" and "# speed:" in err
    rows = json.loads(target.read_text())["rows"]
    assert [row["prompt"] for row in rows] == ["one", "two"]
    alone, _ = _run(capsys, "-", *GREEDY, stdin="two", monkeypatch=monkeypatch)
    assert alone.rstrip("\n") == rows[1]["text"]
