"""`exactspec generate --help`, `--version` and `exactspec cache` answer without importing torch; the
torch-free copies of choices agree with their torch-backed sources; the draft registry is the one table."""

from __future__ import annotations

import subprocess
import sys

import pytest

import exactspec
from exactspec.cli import main as exactspec_main
from exactspec.gpu_impl.cli import cli_args
from exactspec.gpu_impl.drafts import registry

PROBE = """
import sys
from exactspec.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print("TORCH_IMPORTED" if "torch" in sys.modules else "NO_TORCH", file=sys.stderr)
"""


@pytest.mark.parametrize(
    "argv", [["generate", "--help"], ["generate", "--version"], ["cache", "info"], ["--help"]]
)
def test_no_torch_import(argv, tmp_path):
    env = {"EXACTSPEC_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "NO_TORCH" in done.stderr, done.stderr
    if argv == ["generate", "--help"]:
        assert (
            "--prompts FILE" in done.stdout
            and "--json" in done.stdout
            and "prompt-lookup" in done.stdout
        )


@pytest.mark.parametrize("argv", [["--version"], ["generate", "--version"]])
def test_version(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        exactspec_main(argv)
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"exactspec {exactspec.__version__}"


def test_torch_free_choices_match_their_sources():
    from exactspec.gpu_impl.cost.cpu_matmul import CPU_MATMUL_CHOICES

    assert cli_args.CPU_MATMUL_CHOICES == CPU_MATMUL_CHOICES


def test_registry_is_the_one_table_of_draft_sources():
    names = [entry.name for entry in registry.DRAFTS]
    assert len(names) == len(set(names))
    for entry in registry.DRAFTS:
        assert entry.form in registry.DRAFT_CHOICES and entry.summary in registry.draft_help()
        assert registry.entry_for(registry.DraftSpec(entry.name)) is entry
    assert registry.parse_draft(" early-exit:3 ") == registry.DraftSpec("early-exit", n_layers=3)
    with pytest.raises(ValueError, match="takes no argument"):
        registry.parse_draft("none:3")
    with pytest.raises(ValueError, match="must be one of"):
        registry.parse_draft("eagle")
