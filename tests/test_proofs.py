"""The machine checks of proofs/ARGUMENT.md: all pass on the oracle, and each one can fail.

Every check takes the thing under test as a keyword argument; feeding it a deliberately wrong rule or
formula must turn the check red. A check that cannot fail proves nothing. Also: the command line, the
two modes of the traceability check (checkout, installed package) and that the proofs never import torch.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from exactspec.proofs import (
    checks_acceptance,
    checks_any_shape,
    checks_engine,
    checks_loop,
    checks_paired,
    checks_position,
    checks_rules,
    cli,
    float32,
    kernels,
    registry,
    traceability,
)
from exactspec.proofs.kernels import F0, F1

CHECKS = registry.all_checks()
ALL_CLAIMS = {f"C{i}" for i in range(1, 19)}


@pytest.fixture(scope="module")
def results():
    return {r.name: r for r in registry.run_checks()}


def test_every_claim_has_checks():
    covered = {c for chk in CHECKS.values() for c in chk.claims}
    assert covered == ALL_CLAIMS
    for claim in ALL_CLAIMS:  # besides the traceability check, each claim has a check of its own
        assert [n for n, chk in CHECKS.items() if claim in chk.claims and n != "traceability"], (
            claim
        )


@pytest.mark.parametrize("name", list(CHECKS))
def test_check_passes(results, name):
    result = results[name]
    assert result.passed, f"{name}: {result.detail}"


def test_cli_entry_points(capsys):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert cli.run(parser.parse_args(["--only", "exact_single_position", "sym_token_count"])) == 0
    out = capsys.readouterr().out
    assert "C1" in out and "2/2 checks passed" in out
    assert cli.run(parser.parse_args(["--list"])) == 0


def test_exactspec_dispatcher(capsys):
    from exactspec.cli import main

    assert main(["proofs", "--only", "exact_stopping"]) == 0
    assert "exact_stopping" in capsys.readouterr().out


def test_python_m_proofs_exits_nonzero_on_failure(monkeypatch, capsys):
    def broken():
        return registry.CheckResult("broken", False, "deliberately failing")

    monkeypatch.setitem(registry.CHECKS, "broken", registry.Check("broken", ("C1",), broken))
    assert cli.main(["--only", "broken"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_python_m_proofs_subprocess():
    done = subprocess.run(
        [sys.executable, "-m", "exactspec.proofs", "--only", "exact_round_chain"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------------------------------
# Each check fails when fed a wrong rule or formula
# --------------------------------------------------------------------------------------------------


def _failed(result) -> bool:
    return not result.passed and result.detail


def _kernel_round_law(kernel):
    return lambda p_rows, q_rows: kernels.kernel_round_law(kernel, p_rows, q_rows)


def no_min_kernel(p, q):
    """Accept with probability p/q capped wrongly: emits the residual from p, not p - q."""
    return [(min(F1, px / qx) if qx > 0 else F0, list(p)) for px, qx in zip(p, q)]


def test_sym_single_position_can_fail():
    import sympy as sp

    assert _failed(
        checks_position.sym_single_position(
            min_plus_residual=lambda a, b: sp.Min(a, b) + sp.Max(0, b - a)
        )
    )


def test_exact_single_position_can_fail():
    assert _failed(
        checks_position.exact_single_position(round_law=_kernel_round_law(no_min_kernel), cases=20)
    )
    # acceptance reported as sum p q (the sampler-match rate) is wrong for the standard rule
    assert _failed(
        checks_position.exact_single_position(
            acceptance=lambda p, q: sum(a * b for a, b in zip(p, q)), cases=20
        )
    )
    # residual not normalised
    assert _failed(
        checks_position.exact_single_position(
            residual_fn=lambda p, q: [max(F0, a - b) for a, b in zip(p, q)], cases=20
        )
    )


def test_exact_round_chain_can_fail():
    # bonus token drawn from the last draft row instead of p_{k+1}
    def bonus_from_draft(p_rows, q_rows):
        return kernels.kernel_round_law(
            kernels.standard_kernel, list(p_rows[:-1]) + [q_rows[-1]], q_rows
        )

    assert _failed(checks_loop.exact_round_chain(round_law=bonus_from_draft, cases=20))


def test_exact_sequence_law_can_fail():
    from exactspec.reference.sequences import speculative_sequence_law

    def typical_loop(target, draft, prompt, length, k):
        return kernels.kernel_sequence_law(
            kernels.threshold_kernel(), target, draft, tuple(prompt), length, k
        )

    assert _failed(checks_loop.exact_sequence_law(speculative_law=typical_loop))

    # draft conditioned on the round start only
    def prefix_ignoring(target, draft, prompt, length, k):
        stale = lambda prefix: draft(prefix[: len(prompt)])
        return speculative_sequence_law(target, stale, prompt, length, k)

    # still exact: any draft is fine as long as q is what x was drawn from -- the check must pass
    assert checks_loop.exact_sequence_law(speculative_law=prefix_ignoring).passed


def test_exact_stopping_can_fail():
    assert _failed(checks_loop.exact_stopping(kernel=no_min_kernel))


def test_exact_adaptive_k_can_fail():
    assert _failed(checks_loop.exact_adaptive_k(kernel=no_min_kernel))


def test_coupling_bound_can_fail():
    # a rule claiming to accept more than 1 - TV
    assert _failed(
        checks_acceptance.coupling_bound(
            rule_acceptance=lambda p, q: min(
                F1, sum(min(a, b) for a, b in zip(p, q)) + Fraction(1, 100)
            ),
            cases=5,
        )
    )


def test_sym_token_count_can_fail():
    assert _failed(
        checks_acceptance.sym_token_count(mean_formula=lambda a, k: (1 - a**k) / (1 - a))
    )
    assert _failed(checks_acceptance.sym_token_count(var_formula=lambda a, k: a / (1 - a) ** 2))
    assert _failed(
        checks_acceptance.sym_token_count(law_formula=lambda a, k, n: a ** (n - 1) * (1 - a))
    )


def test_oracle_token_count_can_fail():
    from exactspec.reference import speedup

    assert _failed(
        checks_acceptance.oracle_token_count(
            expected_fn=lambda a, k: speedup.expected_tokens(a, k) + (a > 0.5) * 1e-3
        )
    )
    # the count law depends on the acceptance only: a wrong acceptance rule changes it
    assert _failed(
        checks_acceptance.oracle_token_count(
            round_law=_kernel_round_law(kernels.threshold_kernel())
        )
    )


def test_sym_improvement_can_fail():
    from exactspec.reference import speedup

    assert _failed(
        checks_acceptance.sym_improvement(
            improvement_fn=lambda a, k, c, v=None: speedup.expected_tokens(a, k) / (c * k + 2)
        )
    )
    assert _failed(
        checks_acceptance.sym_improvement(
            optimal_fn=lambda a, c, v=None, k_max=32: (1, speedup.improvement_factor(a, 1, c))
        )
    )


def test_warping_counterexamples_can_fail():
    # an "implementation" that always emits the intended p: no counter-example appears, so the check fails
    assert _failed(
        checks_rules.warping_counterexamples(
            law=lambda intended, p_used, q_used, sampled: list(intended)
        )
    )
    # an implementation that ignores the sampling law mismatch breaks the consistent case too
    assert _failed(
        checks_rules.warping_counterexamples(
            law=lambda intended, p_used, q_used, sampled: list(q_used)
        )
    )


def test_exact_greedy_sampler_match_can_fail():
    def always_accept(p, q):  # "sampler-match" that keeps every draft
        return [(F1, list(p)) for _ in p]

    assert _failed(checks_rules.exact_greedy_sampler_match(sampler_match=always_accept))
    assert _failed(checks_rules.exact_greedy_sampler_match(greedy=kernels.standard_kernel))


def test_sampled_rules_on_grid_can_fail():
    import numpy as np

    from exactspec.reference import rules

    # accepts with P(u^2 < p/q) > min(1, p/q)
    def biased_uniforms(target_probs, draft_probs, draft_tokens, rng):
        batch, k = np.shape(draft_tokens)
        accept_u, final_u = rng.random((batch, k)), rng.random(batch)
        return rules.verify_batch(
            target_probs,
            draft_probs,
            draft_tokens,
            checks_rules.GridUniforms([accept_u**2, final_u]),
        )

    assert _failed(checks_rules.sampled_rules_on_grid(verify_batch_fn=biased_uniforms))

    def greedy_off_by_one(target_probs, draft_probs, draft_tokens, rng=None):
        return rules.verify_greedy(target_probs, draft_probs, draft_tokens)[:-1] + [0]

    assert _failed(checks_rules.sampled_rules_on_grid(greedy_fn=greedy_off_by_one))


def test_inexact_rules_counterexamples_can_fail():
    # the standard rule is exact: there is no counter-example to find
    assert _failed(
        checks_rules.inexact_rules_counterexamples(
            kernels={"standard": kernels.standard_kernel}, cases=30
        )
    )


def test_float32_tv_bound_can_fail():
    assert _failed(float32.float32_tv_bound(bound=lambda vocab, k: Fraction(0), cases=10))


def test_float32_bound_is_not_vacuous():
    from exactspec.proofs.float32 import float_tv_bound

    assert float(float_tv_bound(49152, 4)) < 0.1  # SmolLM2's vocabulary
    assert float(float_tv_bound(49152, 8, Fraction(1, 2**53), Fraction(1, 2**53))) < 1e-9


def test_the_engine_checks_can_fail(monkeypatch):
    """PIT values off by 1 % (far more than rho + N a) are caught; a context bettor staking against the envelope's
    cushion (its q inflated) breaks the supermartingale bound; a psi one tenth too small breaks Fan's inequality."""
    from exactspec.conformance.engine import law_checks, law_stream
    from exactspec.proofs import checks_sequential
    from exactspec.stat_tests import sequential

    original = law_stream.pit_value
    monkeypatch.setattr(
        law_stream,
        "pit_value",
        lambda cats, token, draw: (
            original(cats, token, draw)[0],
            original(cats, token, draw)[1] * 0.99,
        ),
    )
    assert _failed(checks_engine.tolerance_envelope_and_slack(cases=50))
    monkeypatch.setattr(law_stream, "pit_value", original)
    grouped = law_checks._grouped
    monkeypatch.setattr(
        law_checks, "_grouped", lambda cats, c: (lambda m, e, g: (m, e * 0.9, g))(*grouped(cats, c))
    )
    assert _failed(checks_engine.context_bettor_supermartingale(cases=100))
    monkeypatch.setattr(law_checks, "_grouped", grouped)
    psi = sequential.psi
    monkeypatch.setattr(sequential, "psi", lambda lam: 0.9 * psi(lam))
    assert _failed(checks_sequential.fan_inequality(points=501))


def test_the_reference_bettor_check_can_fail(monkeypatch):
    """A tempered law inflated by 5 % bets more than the envelope allows: the factor's mean exceeds 1."""
    from exactspec.conformance.engine import law_checks

    tempered = law_checks._tempered
    monkeypatch.setattr(law_checks, "_tempered", lambda cats, theta: 1.05 * tempered(cats, theta))
    assert _failed(checks_engine.reference_bettors_supermartingale(cases=50))


def test_the_any_shape_checks_can_fail():
    """Dropping the rest's mass, halving the report allowance, Hoeffding's lam^2 / 8 for Bennett's phi, a prior that
    sums to 2, and a third of the code's bound are each caught."""
    from types import SimpleNamespace

    from exactspec.conformance.engine.any_shape import any_shape_bound, prefix_weight_of

    assert _failed(checks_any_shape.bins_merge_bound(cases=100, rest_term=lambda p_rest: F0))
    assert _failed(
        checks_any_shape.report_set_tolerance(cases=50, tolerance=lambda cats: 0.5 * cats.eta)
    )
    assert _failed(checks_any_shape.bennett_factor_bernoulli(cases=5, phi=lambda lam: lam**2 / 8))
    doubled = lambda reports: (lambda weight: lambda prompt, prefix: 2 * weight(prompt, prefix))(
        prefix_weight_of(reports)
    )
    assert _failed(checks_any_shape.prefix_prior_sums_to_at_most_one(cases=10, weight_of=doubled))

    def third(*args):
        result = any_shape_bound(*args)
        return SimpleNamespace(
            bound=result.bound / 3,
            per_position={t: {"bound": v["bound"] / 3} for t, v in result.per_position.items()},
        )

    assert _failed(checks_any_shape.any_shape_bound_covers_the_truth(runs=20, bound_of=third))


def _within_unit_block_log_e(name, chosen, views, by_prompt=False):
    """block_log_e on the within-unit pairs (C1, R1), (C2, R2): the pairing C18 (c) shows invalid."""
    import numpy as np

    from exactspec.conformance.engine import paired_checks as pc

    scorer = pc.SCORERS[name](by_prompt)
    log_w = np.zeros(pc.SCALES.size)
    for first, second in chosen:
        (c1, r1), (c2, r2) = views[id(first)], views[id(second)]
        ell = [scorer.score(v) for v in (c1, r1, c2, r2)]
        log_w += np.log(
            pc._sigmoid(pc.SCALES * (ell[0] - ell[1])) + pc._sigmoid(pc.SCALES * (ell[2] - ell[3]))
        )
        for v, role in ((c1, "candidate"), (r1, "reference"), (c2, "candidate"), (r2, "reference")):
            scorer.learn(v, role)
    return pc.mixture_log(log_w)


def test_the_paired_checks_can_fail(monkeypatch):
    """Within-unit pairs lose the mean 1; 4 units are too few for the counter-example; a sigma 1 % too large leaves
    [0, 1]; a block_log_e on within-unit pairs is not the code's cross-pair product."""
    from exactspec.conformance.engine import paired_checks

    assert _failed(checks_paired.cross_pair_mean_is_one(cases=20, pairing="within"))
    assert _failed(checks_paired.within_unit_pair_can_be_biased(units=4))
    assert _failed(
        checks_paired.block_log_e_reads_cross_pairs(cases=10, block=_within_unit_block_log_e)
    )
    sigmoid = paired_checks._sigmoid
    monkeypatch.setattr(paired_checks, "_sigmoid", lambda x: 1.01 * sigmoid(x))
    assert _failed(checks_paired.block_factor_is_bounded(points=201))


def test_traceability_can_fail():
    text = traceability.ARGUMENT.read_text()
    assert _failed(
        traceability.traceability(
            text.replace("`reference/laws.py:residual`", "`reference/laws.py:no_such_function`")
        )
    )
    assert _failed(
        traceability.traceability(text.replace("`check:exact_stopping`", "`check:no_such_check`"))
    )
    assert _failed(
        traceability.traceability(
            text.replace("`tests/test_reference_warping.py`", "`conformance/test_no_such_file.py`")
        )
    )
    rows = [line for line in text.splitlines() if line.startswith("| C12 |")]
    assert _failed(traceability.traceability(text.replace(rows[0], "")))


def test_float32_law_model_is_exact_on_dyadic_rows():
    """Sanity of the float32 law model: with dyadic rows nothing rounds, so it must equal the exact law."""
    from exactspec.reference.laws import round_distribution

    p_rows = [
        [Fraction(1, 2), Fraction(1, 4), Fraction(1, 4)],
        [Fraction(1, 8), Fraction(3, 8), Fraction(1, 2)],
        [F0, Fraction(1, 4), Fraction(3, 4)],
    ]
    q_rows = [
        [Fraction(1, 4), Fraction(1, 4), Fraction(1, 2)],
        [Fraction(1, 2), Fraction(1, 2), F0],
    ]
    assert float32.f32_round_law(p_rows, q_rows) == {
        t: v for t, v in round_distribution(p_rows, q_rows).items() if v
    }
    # and a non-dyadic row does move the law, by less than the bound
    p_rows[0] = [Fraction(1, 3), Fraction(1, 3), Fraction(1, 3)]
    distance = kernels.tv_law(
        float32.f32_round_law(p_rows, q_rows), round_distribution(p_rows, q_rows)
    )
    assert 0 < distance <= float32.float_tv_bound(3, 2)


# --------------------------------------------------------------------------------------------------
# The registry, the command line, and the modules' independence from torch and the oracle
# --------------------------------------------------------------------------------------------------


def test_checks_listed_in_the_order_of_the_argument():
    names = list(CHECKS)
    assert names[0] == "sym_single_position" and names[-1] == "traceability"
    assert (
        names.index("exact_stopping")
        < names.index("coupling_bound")
        < names.index("float32_tv_bound")
    )


def test_run_checks_rejects_unknown_names():
    with pytest.raises(ValueError, match="names"):
        registry.run_checks(["no_such_check"])


def test_cli_rejects_unknown_check(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--only", "no_such_check"])
    assert "invalid choice" in capsys.readouterr().err


_TORCH_FREE_RUN = """
import importlib.abc, sys
attempts = []
class BlockTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            attempts.append(name)
            raise ImportError("torch is blocked in this test")
        return None
sys.meta_path.insert(0, BlockTorch())
from exactspec.proofs.cli import main
status = main([])
assert status == 0, status
assert not attempts and "torch" not in sys.modules, attempts
print("TORCH-FREE")
"""


def test_proofs_run_without_importing_torch(tmp_path):
    """Every check passes with torch made unimportable, and nothing even tries to import it."""
    done = subprocess.run(
        [sys.executable, "-c", _TORCH_FREE_RUN], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0 and "TORCH-FREE" in done.stdout, (
        done.stdout[-2000:] + done.stderr[-2000:]
    )
    assert f"{len(CHECKS)}/{len(CHECKS)} checks passed" in done.stdout


def test_independent_modules_do_not_import_the_oracle():
    """kernels.py and cases.py re-derive the primitives: they must not import exactspec.reference."""
    import ast

    for module in ("kernels", "cases", "registry"):
        tree = ast.parse((Path(traceability.__file__).parent / f"{module}.py").read_text())
        imported = [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        ]
        imported += [
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        ]
        assert imported and not [name for name in imported if "reference" in name], (
            module,
            imported,
        )


def test_warped_probs_matches_the_oracle_bit_for_bit():
    """The re-derived warping gives the oracle's float64 rows exactly, so C9's counter-examples are the same."""
    import numpy as np

    from exactspec.reference.warping import warp_probs

    logits = np.array([1.5, -0.25, 0.75, 0.75, 2.0, -1.0])
    for temperature, top_k in ((1.0, None), (0.6, None), (0.6, 3), (1.3, 4)):
        assert np.array_equal(
            kernels.warped_probs(logits, temperature, top_k), warp_probs(logits, temperature, top_k)
        )
    with pytest.raises(ValueError, match="temperature"):
        kernels.warped_probs(logits, 0.0)


# --------------------------------------------------------------------------------------------------
# Traceability in a checkout and in an installed package
# --------------------------------------------------------------------------------------------------


def _installed_tree(root: Path) -> Path:
    """A copy of the package as a wheel installs it: the package folders, no pyproject.toml, no tests/."""
    for folder in ("reference", "gpu_impl", "conformance", "proofs", "stat_tests"):
        shutil.copytree(
            traceability.PACKAGE_ROOT / folder,
            root / folder,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    return root


def test_checkout_detection(tmp_path):
    assert traceability.is_checkout(traceability.PACKAGE_ROOT)  # the tests run from a checkout
    assert not traceability.is_checkout(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "not-exactspec"\n')
    assert not traceability.is_checkout(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\n\n[project]\nversion = "1"\nname = "exactspec"\n'
    )
    assert traceability.is_checkout(tmp_path)
    (tmp_path / "tests").rmdir()
    assert not traceability.is_checkout(tmp_path)


def test_traceability_checkout_mode_says_so(results):
    assert results["traceability"].detail.startswith("checkout mode")


def test_traceability_installed_mode(tmp_path):
    base = _installed_tree(tmp_path)
    result = traceability.traceability(base=base)
    assert result.passed, result.detail
    assert (
        result.detail.startswith("installed-package mode")
        and "tests/ files not checked" in result.detail
    )
    # the code and the conformance test files a wheel ships are still checked
    (base / "conformance" / "rule" / "test_rule_level.py").unlink()
    assert _failed(traceability.traceability(base=base))
    shutil.rmtree(base / "gpu_impl")
    assert "gpu_impl/" in traceability.traceability(base=base).detail


def test_traceability_checkout_mode_checks_tests_folder(tmp_path):
    base = _installed_tree(tmp_path)
    (base / "tests").mkdir()
    (base / "pyproject.toml").write_text('[project]\nname = "exactspec"\n')
    result = traceability.traceability(base=base)  # a checkout without its tests/ files
    assert _failed(result) and "tests/" in result.detail


def test_defines_finds_functions_classes_and_methods():
    laws = traceability.PACKAGE_ROOT / "reference" / "laws.py"
    warping = traceability.PACKAGE_ROOT / "reference" / "warping.py"
    assert traceability.defines(laws, "residual") and traceability.defines(
        warping, "SamplingParams.warp"
    )
    assert not traceability.defines(laws, "no_such_function")
    assert not traceability.defines(laws, "residual.inner")  # a function is not a scope
    assert not traceability.defines(warping, "SamplingParams.no_such_method")


def test_python_m_exactspec_proofs_from_outside_the_checkout(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "exactspec.proofs", "--only", "traceability"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and "1/1 checks passed" in done.stdout, done.stdout + done.stderr
