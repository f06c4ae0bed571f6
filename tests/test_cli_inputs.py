"""`exactspec generate`'s prompts (cli_inputs): positional, stdin, --prompts as text or JSON Lines, per-row options,
and the grouping into batches. Torch-free and fast."""

from __future__ import annotations

import argparse
import io

import pytest

from exactspec.gpu_impl.cli.cli_args import add_arguments
from exactspec.gpu_impl.cli.cli_inputs import group_rows, read_prompts


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_positional_prompts_keep_order_and_take_seed_plus_index():
    rows = read_prompts(_args("one", "two", "three", "--seed", "10"))
    assert [row.text for row in rows] == ["one", "two", "three"]
    assert [row.seed for row in rows] == [10, 11, 12]
    assert [row.where for row in rows] == ["prompt 1", "prompt 2", "prompt 3"]


def test_dash_reads_one_prompt_from_stdin():
    rows = read_prompts(_args("-"), stdin=io.StringIO("def f(x):\n    return"))
    assert [row.text for row in rows] == ["def f(x):\n    return"]


def test_prompt_file_one_per_line_skips_blank_lines(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_text("first\n\n  \nsecond\r\n")
    rows = read_prompts(_args("zero", "--prompts", str(path)))
    assert [row.text for row in rows] == ["zero", "first", "second"]
    assert rows[2].where == f"line 4 of {path}"


def test_json_lines_with_per_row_options_from_stdin():
    text = '{"prompt": "a", "seed": 7, "id": "x"}\n{"prompt": "b", "temperature": 0, "max_new_tokens": 3}\n'
    rows = read_prompts(_args("--prompts", "-", "--temperature", "0.5"), stdin=io.StringIO(text))
    assert [(r.text, r.seed, r.id, r.sampling.temperature, r.max_new_tokens) for r in rows] == [
        ("a", 7, "x", 0.5, 64),
        ("b", 1, None, 0, 3),
    ]


def test_jsonl_suffix_forces_json(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("not json\n")
    with pytest.raises(ValueError, match="line 1 of .*not valid JSON"):
        read_prompts(_args("--prompts", str(path)))


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"prompt": "a", "colour": 1}', "unknown key"),
        ('{"text": "a"}', 'a "prompt" string'),
        ('{"prompt": "a", "seed": "3"}', "seed must be an integer"),
        ('{"prompt": "a", "top_p": 2}', "top_p must be in"),
        ('{"prompt": "a", "max_new_tokens": -1}', ">= 0"),
        ('{"prompt": "   "}', "is empty"),
    ],
)
def test_bad_json_rows_name_the_line(tmp_path, line, message):
    path = tmp_path / "p.txt"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(ValueError, match=message) as error:
        read_prompts(_args("--prompts", str(path)))
    assert "line 2 of" in str(error.value)


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        ([], "", "no prompt given"),
        (["   "], "", "the prompt is empty"),
        (["ok", ""], "", "prompt 2 is empty"),
        (["-"], "\n \n", "the prompt is empty"),
        (["-", "--prompts", "-"], "a\n", "stdin can be read only once"),
        (["--prompts", "/nonexistent/prompts.txt"], "", "cannot read it"),
    ],
)
def test_missing_or_empty_prompts(argv, stdin, message):
    with pytest.raises(ValueError, match=message):
        read_prompts(_args(*argv), stdin=io.StringIO(stdin))


def test_empty_prompt_file(tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(ValueError, match="holds no prompt"):
        read_prompts(_args("--prompts", str(tmp_path / "empty.txt")))


def test_groups_share_sampling_and_length_in_first_appearance_order():
    text = "\n".join(
        [
            '{"prompt": "a"}',
            '{"prompt": "b", "temperature": 0}',
            '{"prompt": "c", "seed": 5}',
            '{"prompt": "d", "temperature": 0, "max_new_tokens": 2}',
            '{"prompt": "e", "temperature": 0}',
        ]
    )
    groups = group_rows(read_prompts(_args("--prompts", "-"), stdin=io.StringIO(text)))
    assert [[row.text for row in group] for group in groups] == [["a", "c"], ["b", "e"], ["d"]]
