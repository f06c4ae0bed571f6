"""The one adapter loader, the one error root, implementation exceptions as failed cases (never a crash),
the exit statuses of `exactspec certify`, the provenance record and the light public facade."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from exactspec.conformance import certify_command as certify
from exactspec.conformance.loader import call_implementation, level_of, load_adapter
from exactspec.conformance.provenance import collect, git_commit, sha256_of_file
from exactspec.outcomes import ExitCode, Verdict
from exactspec.errors import (
    AdapterLoadError,
    ContractViolation,
    ExactspecError,
    ImplementationError,
    ImplUnavailable,
    Unsupported,
)

EXACTSPEC = str(Path(sys.executable).with_name("exactspec"))

RULE_MODULE = """
from exactspec import reference

class Good:
    def verify(self, p, q, x, rng):
        return reference.verify(p, q, x, rng)

class Asserts:
    def verify(self, p, q, x, rng):
        assert x[0] < 0, "my own invariant broke"
        return [0]

def factory():
    return Good()

def needs_args(a, b):
    return Good()

class Neither:
    pass
"""

SEQUENCE_MODULE = """
class Gen:
    def generate(self, target, draft, prompt_ids, max_new_tokens, k, sampling, seed):
        return [0]
"""

PLAIN_LOOP_MODULE = """
from exactspec.conformance.sequence.reference_loop import ReferenceLoop

class PlainLoop:
    \"\"\"A sequence-level adapter that wraps exactspec's plain reference loop.\"\"\"

    name = "plain-loop"

    def __init__(self):
        self._loop = ReferenceLoop()

    def generate(self, target, draft, prompt_ids, max_new_tokens, k, sampling, seed):
        return self._loop.generate(target, draft, prompt_ids, max_new_tokens, k, sampling, seed)
"""


@pytest.fixture
def adapter_dir(tmp_path, monkeypatch):
    """A temporary cwd holding rule_mod.py, seq_mod.py and broken_mod.py (which imports a missing package)."""
    (tmp_path / "rule_mod.py").write_text(textwrap.dedent(RULE_MODULE))
    (tmp_path / "seq_mod.py").write_text(textwrap.dedent(SEQUENCE_MODULE))
    (tmp_path / "broken_mod.py").write_text("import surely_missing_dependency_xyz\n")
    (tmp_path / "crashing_mod.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield tmp_path
    for name in ("rule_mod", "seq_mod", "broken_mod", "crashing_mod"):
        sys.modules.pop(name, None)


# ------------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error_class",
    [AdapterLoadError, ContractViolation, ImplementationError, ImplUnavailable, Unsupported],
)
def test_suite_errors_share_one_root_and_are_not_assertions(error_class):
    assert issubclass(error_class, ExactspecError)
    assert not issubclass(error_class, AssertionError)


def test_harness_and_sequence_adapters_reexport_the_same_classes():
    from exactspec.conformance.rule import harness

    assert (
        harness.ContractViolation is ContractViolation
        and harness.ImplUnavailable is ImplUnavailable
    )
    assert harness.ImplementationError is ImplementationError
    pytest.importorskip("torch")
    from exactspec.conformance.sequence.adapters import Unsupported as SequenceUnsupported

    assert SequenceUnsupported is Unsupported


# ------------------------------------------------------------------------------------------------------
# call_implementation and the Harness
# ------------------------------------------------------------------------------------------------------


def _asserting(x):
    assert x > 10, f"x={x} too small"


def test_call_implementation_wraps_assertion_with_type_and_traceback():
    with pytest.raises(ImplementationError) as caught:
        call_implementation(_asserting, 3)
    error = caught.value
    assert error.exc_type == "AssertionError"
    assert "x=3 too small" in str(error) and "_asserting" in str(error)
    assert (
        "_asserting" in error.traceback_text
        and "AssertionError: x=3 too small" in error.traceback_text
    )
    assert "call_implementation" not in error.traceback_text  # the suite's own frame is cut
    assert isinstance(error.original, AssertionError)


def test_call_implementation_returns_and_passes_signals_through():
    assert call_implementation(lambda a, b=0: a + b, 2, b=3) == 5

    def unsupported():
        raise Unsupported("no batch")

    with pytest.raises(Unsupported, match="no batch"):
        call_implementation(unsupported)


def test_harness_turns_an_assert_inside_verify_into_implementation_error(adapter_dir):
    from exactspec.conformance.rule.cases import SUITE_CASES
    from exactspec.conformance.rule.harness import Harness, load_impl

    harness = Harness(load_impl("rule_mod:Asserts"), "asserts")
    with pytest.raises(ImplementationError) as caught:
        harness.run(SUITE_CASES[0], 5, seed=1)
    assert caught.value.exc_type == "AssertionError"
    assert "my own invariant broke" in caught.value.traceback_text
    assert SUITE_CASES[0].name in str(caught.value)


# ------------------------------------------------------------------------------------------------------
# the loader
# ------------------------------------------------------------------------------------------------------


def test_loader_tells_the_level_and_calls_factories(adapter_dir):
    rule = load_adapter("rule_mod:Good")
    assert rule.level == "rule" and rule.module == "rule_mod" and callable(rule.adapter.verify)
    assert load_adapter("rule_mod:factory").level == "rule"
    sequence = load_adapter("seq_mod:Gen")
    assert sequence.level == "sequence" and level_of(sequence.adapter) == "sequence"
    assert str(adapter_dir) in sys.path  # the cwd was put on sys.path


def test_loader_never_changes_the_asked_level(adapter_dir):
    with pytest.raises(AdapterLoadError, match="sequence level was asked"):
        load_adapter("rule_mod:Good", level="sequence")
    with pytest.raises(AdapterLoadError, match="rule level was asked"):
        load_adapter("seq_mod:Gen", level="rule")
    with pytest.raises(ValueError, match="level must be one of"):
        load_adapter("rule_mod:Good", level="both")


def test_loader_reports_an_import_error_as_such(adapter_dir):
    with pytest.raises(AdapterLoadError) as caught:
        load_adapter("broken_mod:Thing")
    message = str(caught.value)
    assert "broken_mod" in message and "ModuleNotFoundError" in message
    assert "surely_missing_dependency_xyz" in message
    assert caught.value.module == "broken_mod" and isinstance(caught.value.cause, ImportError)
    with pytest.raises(AdapterLoadError, match="boom at import"):
        load_adapter("crashing_mod:Thing")


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("no_colon", "MODULE:NAME"),
        ("rule_mod:", "non-empty"),
        ("rule_mod:Missing", "no attribute 'Missing'"),
        ("rule_mod:needs_args", "needs arguments"),
        ("rule_mod:Neither", "no callable verify"),
    ],
)
def test_loader_bad_specs_raise_value_errors_naming_the_problem(adapter_dir, spec, fragment):
    with pytest.raises(AdapterLoadError, match=fragment) as caught:
        load_adapter(spec)
    assert isinstance(caught.value, ValueError)


def test_loader_builtins_and_unavailable_factories():
    sentinel = object()

    class Gen:
        def generate(self, *args):
            return []

    assert load_adapter("mine", builtins={"mine": Gen}).level == "sequence"

    def unavailable():
        raise ImplUnavailable("no CUDA here")

    with pytest.raises(ImplUnavailable, match="no CUDA"):
        load_adapter(unavailable)
    with pytest.raises(AdapterLoadError, match="verify"):
        load_adapter(sentinel)


def test_sequence_loader_uses_the_cwd_and_refuses_rule_adapters(adapter_dir):
    pytest.importorskip("torch")
    from exactspec.conformance.sequence.adapters import load_adapter as load_generation_adapter

    assert load_generation_adapter("seq_mod:Gen") is not None
    assert load_generation_adapter("rule_mod:Good") is None
    assert load_generation_adapter("reference") is not None  # builtin names keep working
    with pytest.raises(AdapterLoadError, match="surely_missing_dependency_xyz"):
        load_generation_adapter("broken_mod:Thing")


# ------------------------------------------------------------------------------------------------------
# provenance
# ------------------------------------------------------------------------------------------------------


def test_provenance_records_the_implementation_and_the_run(adapter_dir):
    record = collect("rule_mod:Good", argv=["exactspec", "certify", "--impl", "rule_mod:Good"])
    json.dumps(record)  # serializable
    impl = record["implementation"]
    # in the cwd; never an absolute path
    assert impl["module"] == "rule_mod" and impl["file"] == "./rule_mod.py"
    assert (
        impl["source_sha256"]
        == hashlib.sha256((adapter_dir / "rule_mod.py").read_bytes()).hexdigest()
    )
    assert impl["distribution"] is None  # a loose file belongs to no distribution
    assert record["command_line"] == ["exactspec", "certify", "--impl", "rule_mod:Good"]
    assert record["exactspec"]["version"]
    assert record["machine"]["cpu_count"] >= 1 and record["machine"]["python"].count(".") == 2
    assert set(record["libraries"]) >= {"numpy", "scipy"}
    assert record["timestamp_utc"].endswith("+00:00")


def test_provenance_distribution_git_and_errors(tmp_path):
    record = collect("exactspec.conformance.adapters.reference:Reference")
    assert record["implementation"]["distribution"]["name"] == "exactspec"
    from exactspec.conformance.paths import portable_args

    # argv with this machine's paths written portably
    assert record["command_line"] == portable_args(sys.argv)
    assert git_commit(tmp_path) is None  # not a checkout
    assert sha256_of_file(tmp_path / "absent.py") is None
    builtin = collect("reference")["implementation"]
    assert builtin["module"] is None and builtin["source_sha256"] is None
    with pytest.raises(ValueError, match="impl_spec"):
        collect(None)


def test_provenance_and_facade_never_import_torch(tmp_path):
    code = (
        "import sys, exactspec.conformance as c; light = not {'numpy', 'torch'} & set(sys.modules); "
        "from exactspec.conformance.provenance import collect; r = collect('exactspec.reference:verify'); "
        "print(light, 'torch' in sys.modules, 'torch' in r['libraries'], c.CONTRACT_VERSION, "
        "c.ImplUnavailable.__name__, c.Unsupported.__name__, c.ExactspecError.__name__, "
        "c.SamplingParams.__name__, callable(c.load_cases), callable(c.strategies.round_cases))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "True",
        "False",
        "False",
        "1.4",
        "ImplUnavailable",
        "Unsupported",
        "ExactspecError",
        "SamplingParams",
        "True",
        "True",
    ]


# ------------------------------------------------------------------------------------------------------
# exit statuses
# ------------------------------------------------------------------------------------------------------


def _args(tmp_path: Path, impl: str, **overrides) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    certify.add_arguments(parser)
    args = parser.parse_args(
        [
            "--impl",
            impl,
            "--out",
            str(tmp_path / "out"),
            "--profile",
            "quick",
            "--no-progress",
            "--no-hypothesis",
        ]
    )
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


def test_out_is_checked_for_writability(tmp_path):
    assert certify.check_writable(tmp_path / "new" / "dir").is_dir()
    assert list((tmp_path / "new" / "dir").iterdir()) == []  # the probe is gone
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="--out"):
        certify.check_writable(blocker / "sub")


def test_exit_statuses_of_certify(adapter_dir, capsys, monkeypatch):
    assert certify.run(_args(adapter_dir, "broken_mod:Thing")) == ExitCode.USAGE
    assert "surely_missing_dependency_xyz" in capsys.readouterr().err
    (adapter_dir / "blocker").write_text("x")
    assert (
        certify.run(_args(adapter_dir, "rule_mod:Good", out=str(adapter_dir / "blocker" / "o")))
        == 2
    )
    assert certify.run(_args(adapter_dir, "rule_mod:Good", level="sequence")) == 2
    assert certify.run(_args(adapter_dir, "exactspec.conformance.loader:NoSuch")) == 2
    (adapter_dir / "unavail_mod.py").write_text(
        "from exactspec.conformance import ImplUnavailable\n"
        "def Thing():\n    raise ImplUnavailable('needs a GPU')\n"
    )
    assert certify.run(_args(adapter_dir, "unavail_mod:Thing")) == ExitCode.UNAVAILABLE
    assert "needs a GPU" in capsys.readouterr().err

    def crash(*args, **kwargs):
        raise KeyError("internal bug")

    monkeypatch.setattr("exactspec.conformance.api.run_level", crash)
    assert certify.run(_args(adapter_dir, "rule_mod:Good")) == ExitCode.INTERNAL
    assert "please report it" in capsys.readouterr().err.lower()
    sys.modules.pop("unavail_mod", None)


def test_verdicts_map_to_documented_exit_codes():
    assert Verdict("CERTIFIED").exit_code == Verdict("EXACT_NOT_STANDARD").exit_code == 0
    assert Verdict("NOT_EXACT").exit_code == Verdict("CONTRACT_VIOLATION").exit_code == 1
    done = subprocess.run(
        [EXACTSPEC, "certify", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    for fragment in (
        "0  done: CERTIFIED or EXACT_NOT_STANDARD",
        "1  NOT_EXACT or CONTRACT_VIOLATION",
        "2  usage error",
        "3  exactspec itself crashed",
        "4  INCONCLUSIVE",
        "6  unavailable",
        "the implementation is unavailable here",
    ):
        assert fragment in done.stdout


def test_cli_lists_kill_table_and_answers_unknown_commands():
    from exactspec import cli

    assert cli.SUBCOMMANDS["kill-table"][0] == "exactspec.conformance.kill_table"
    assert cli.main([]) == 2
    with pytest.raises(SystemExit) as caught:
        cli.main(["no-such-command"])
    assert caught.value.code == 2


# ------------------------------------------------------------------------------------------------------
# end to end, in a fresh directory, no PYTHONPATH
# ------------------------------------------------------------------------------------------------------


def _certify_in(
    tmp_path: Path, module: str, source: str, impl: str, *extra: str
) -> subprocess.CompletedProcess:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    command = [
        EXACTSPEC,
        "certify",
        "--impl",
        impl,
        "--profile",
        "quick",
        "--out",
        "out/",
        "--no-progress",
        *extra,
    ]
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )


def test_end_to_end_assert_inside_verify_is_a_failed_certificate(tmp_path):
    done = _certify_in(tmp_path, "myrule", RULE_MODULE, "myrule:Asserts", "--no-hypothesis")
    log = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 1, log
    assert "NOT_EXACT" in done.stdout or "CONTRACT_VIOLATION" in done.stdout, log
    assert "Traceback" not in done.stderr, log  # recorded, not crashed
    certificate = (tmp_path / "out" / "certificate.json").read_text()
    assert "AssertionError" in certificate and "my own invariant broke" in certificate


@pytest.mark.slow
def test_end_to_end_sequence_adapter_in_the_cwd_certifies_at_the_sequence_level(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # one case: the point is that the loader finds the adapter in the cwd and the level runs it end to end
    done = _certify_in(
        tmp_path, "myseq", PLAIN_LOOP_MODULE, "myseq:PlainLoop", "--cases", "t1.0_k2"
    )
    log = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, log
    assert "sequence level" in done.stdout and "CERTIFIED" in done.stdout, log
    assert "has no callable verify" not in log
    assert any((tmp_path / "out").iterdir()), log


def test_every_subcommand_names_an_existing_module():
    import importlib.util

    from exactspec import cli

    missing = []
    for name, (module, _) in cli.SUBCOMMANDS.items():
        try:
            if importlib.util.find_spec(module) is None:
                missing.append(name)
        except ImportError:  # its parent package needs torch, absent here: not this test's concern
            continue
    assert missing == []


def test_provenance_says_when_the_checkout_has_uncommitted_changes(tmp_path):
    from exactspec.conformance.provenance import git_commit, git_uncommitted_changes

    assert git_uncommitted_changes(tmp_path) is None  # not a checkout: unknown, never "clean"

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    assert git_commit(tmp_path) is not None and git_uncommitted_changes(tmp_path) is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_uncommitted_changes(tmp_path) is True
