"""Calibration, power and cost of stat_tests.

    python benchmarks/stat_calibration.py [--seeds N] [--power-seeds M] [--out path]

Calibration: each test on samples from the exact law over --seeds fixed seeds; empirical
rejection rate at alpha = 0.01 and 0.001 with Clopper-Pearson 95% and 99% intervals (ok
when nominal alpha >= the 99% interval's lower end; 99% because ~26 rates are judged).  Tail study: Pearson/G statistics simulated
on bin counts (equivalent, since bins are fixed in advance) down to alpha = 1e-5.
Power: least-favourable planted deviations (|q_b - p_b|/p_b constant, so Cohen's w equals
2*TV) of TV 0.01/0.02/0.05 at the n planned by `min_num_samples_chisquare_gof`, vs promised 1 - false_pass_rate.
Cost: wall time per test at V = 10, 1,000, 150,000 with n = 100,000.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import scipy
import statsmodels
from scipy import stats

from exactspec import stat_tests as st
from exactspec.conformance.paths import portable_path
from exactspec.reference.sampling import inverse_cdf
from exactspec.stat_tests.binning import pool_bins
from exactspec.stat_tests.binomial import clopper_pearson, rejection_rate
from exactspec.stat_tests.gof import pearson_pvalue
from exactspec.stat_tests.lr_tail import lr_pvalue

FALSE_FAIL_RATES = (0.01, 0.001)


def cp_interval(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    return clopper_pearson(int(k), int(n), conf)


def zipf(V: int, s: float = 1.0) -> np.ndarray:
    p = 1.0 / np.arange(1, V + 1) ** s
    return p / p.sum()


def rates(pvals, false_fail_rates=FALSE_FAIL_RATES) -> dict:
    out = {}
    for a in false_fail_rates:
        k, n, rate, ci95 = rejection_rate(pvals, a, 0.95)
        ci99 = rejection_rate(pvals, a, 0.99)[3]
        out[str(a)] = {
            "rejections": k,
            "seeds": n,
            "rate": rate,
            "ci95": list(ci95),
            "ci99": list(ci99),
            "ok": bool(a >= ci99[0]),
            "rate_over_nominal": rate / a,
        }
    return out


# ---------------------------------------------------------------- calibration
def markov_sequences(S: int, n: int, V: int, seed: int):
    """S independent Markov chains of length n over V tokens (p_t depends on the prefix)."""
    rng = np.random.default_rng(seed)
    T = rng.dirichlet(np.full(V, 0.3), size=V)  # transition rows
    cdf = np.cumsum(T, axis=1)
    x = np.empty((S, n), dtype=np.int64)
    prev = rng.integers(0, V, size=S)
    prevs = np.empty((S, n), dtype=np.int64)
    for t in range(n):
        u = rng.random(S)
        cur = np.minimum((cdf[prev] < u[:, None]).sum(axis=1), V - 1)
        prevs[:, t] = prev
        x[:, t] = cur
        prev = cur
    return T, x, prevs


def calibration(S: int) -> dict:
    out = {}
    t0 = time.time()

    def run(name, fn):
        t = time.time()
        pv = [fn(i) for i in range(S)]
        out[name] = {"rates": rates(pv), "seconds": round(time.time() - t, 2)}
        print(
            f"  calib {name}: {out[name]['rates']['0.01']['rate']:.4f} / "
            f"{out[name]['rates']['0.001']['rate']:.4f} ({out[name]['seconds']} s)",
            flush=True,
        )

    p10 = np.full(10, 0.1)
    run(
        "chisquare_gof pearson V=10 uniform n=1000",
        lambda i: (
            st.assert_chisquare_gof(
                np.random.default_rng(i).choice(10, 1000, p=p10), p10, 0.01
            ).p_value
        ),
    )
    pz = zipf(1000)
    run(
        "chisquare_gof pearson V=1000 zipf n=20000 (pooled)",
        lambda i: (
            st.assert_chisquare_gof(
                counts=np.random.default_rng(10_000 + i).multinomial(20000, pz),
                p=pz,
                false_fail_rate=0.01,
            ).p_value
        ),
    )
    run(
        "chisquare_gof g V=1000 zipf n=20000 (pooled)",
        lambda i: (
            st.assert_chisquare_gof(
                counts=np.random.default_rng(10_000 + i).multinomial(20000, pz),
                p=pz,
                false_fail_rate=0.01,
                method="g",
            ).p_value
        ),
    )
    pbig = zipf(150_000)
    run(
        "chisquare_gof pearson V=150000 zipf n=100000 (pooled)",
        lambda i: (
            st.assert_chisquare_gof(
                counts=np.random.default_rng(20_000 + i).multinomial(100_000, pbig),
                p=pbig,
                false_fail_rate=0.01,
            ).p_value
        ),
    )
    p4 = np.array([0.5, 0.25, 0.15, 0.1])
    run(
        "multinomial_exact_test exact V=4 n=20",
        lambda i: (
            st.assert_multinomial_exact(
                counts=np.random.default_rng(30_000 + i).multinomial(20, p4),
                p=p4,
                false_fail_rate=0.01,
            ).p_value
        ),
    )
    p8 = zipf(8)
    run(
        "multinomial_exact_test monte-carlo V=8 n=40 n_sim=2000",
        lambda i: (
            st.assert_multinomial_exact(
                counts=np.random.default_rng(40_000 + i).multinomial(40, p8),
                p=p8,
                false_fail_rate=0.01,
                n_sim=2000,
                rng=i,
            ).p_value
        ),
    )

    V, n = 50, 1000
    T, x, prevs = markov_sequences(S, n, V, seed=5)
    for ordering in ("id", "prob"):
        us = [
            st.pit_values(x[i], T[prevs[i]], np.random.default_rng(50_000 + i), ordering)
            for i in range(S)
        ]
        run(
            f"pit_uniformity ks ordering={ordering} Markov V=50 n=1000",
            lambda i: st.assert_pit_uniform(us[i], 0.01).p_value,
        )
        run(
            f"pit_uniformity chisquare ordering={ordering} Markov V=50 n=1000",
            lambda i: st.assert_pit_uniform(us[i], 0.01, method="chisquare").p_value,
        )

    law = np.array([0.35, 0.25, 0.18, 0.12, 0.10])  # P(N = 1..5), k = 4
    Ns = [np.random.default_rng(60_000 + i).choice(np.arange(1, 6), 2000, p=law) for i in range(S)]
    mu = float(np.dot(np.arange(1, 6), law))
    var = float(np.dot(np.arange(1, 6) ** 2, law) - mu * mu)
    run(
        "tokens_per_round k=4 n=2000",
        lambda i: st.assert_tokens_per_round(Ns[i], law, 0.01).p_value,
    )
    run("mean_tokens z k=4 n=2000", lambda i: st.assert_mean_tokens(Ns[i], mu, var, 0.01).p_value)
    run(
        "two_sample_chisquare V=1000 zipf n_a=n_b=10000",
        lambda i: (
            st.assert_two_sample_chisquare(
                np.random.default_rng(70_000 + i).choice(1000, 10000, p=pz),
                np.random.default_rng(80_000 + i).choice(1000, 10000, p=pz),
                0.01,
            ).p_value
        ),
    )
    print(f"  calibration total {time.time() - t0:.1f} s", flush=True)
    return out


def tail_study(sims_small: int, sims_zipf: int) -> dict:
    """Empirical tail of the Pearson (plain / moment-corrected) and G (Williams) p-values."""
    out = {}
    false_fail_rates = (1e-3, 1e-4, 1e-5)
    cases = [
        ("V=10 uniform n=200 (every expected count = 20)", np.full(10, 0.1), 200, sims_small),
        ("V=10 zipf n=400 (min expected 20, unequal)", zipf(10), None, sims_small),
        ("V=1000 zipf n=20000 pooled to min expected 20", zipf(1000), 20000, sims_zipf),
    ]
    for label, p, n, sims in cases:
        if n is None:
            n = int(np.ceil(20 / p.min()))
        _, pb = pool_bins(p, n, 20.0)
        B = pb.size
        rng = np.random.default_rng(123)
        pv_plain, pv_corr, pv_g = [], [], []
        e = n * pb
        q = 1.0 + (B + 1.0) / (6.0 * n)
        done = 0
        while done < sims:
            b = min(max(1, 20_000_000 // B), sims - done)
            X = rng.multinomial(n, pb, size=b).astype(np.float64)
            stat = ((X - e) ** 2 / e).sum(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                g = 2.0 * np.where(X > 0, X * np.log(X / e), 0.0).sum(axis=1)
            pv_plain.append(stats.chi2.sf(stat, B - 1))
            _, _, info = pearson_pvalue(0.0, pb, n)
            pv_corr.append(
                np.maximum(stats.chi2.sf(stat / info["scale"], info["nu"]), pv_plain[-1])
            )
            pv_g.append(stats.chi2.sf(g / q, B - 1))
            done += b
        res = {"n": n, "n_bins": B, "sims": sims}
        for key, pv in (
            ("pearson_plain_chi2", pv_plain),
            ("pearson_moment_corrected (used)", pv_corr),
            ("g_williams (used)", pv_g),
        ):
            res[key] = rates(np.concatenate(pv), false_fail_rates)
        out[label] = res
        print(
            f"  tail {label}: corrected 1e-4 -> {res['pearson_moment_corrected (used)']['0.0001']['rate']:.2e}, "
            f"1e-5 -> {res['pearson_moment_corrected (used)']['1e-05']['rate']:.2e}",
            flush=True,
        )
    return out


# ---------------------------------------------------------------- power
def least_favourable(p: np.ndarray, bin_of: np.ndarray, pb: np.ndarray, eps: float):
    """Token law q with binned TV(q, p) = eps and |q_b - p_b| / p_b (nearly) constant."""
    order = np.argsort(-pb, kind="stable")
    s = np.empty(pb.size)
    mass = [0.0, 0.0]
    for b in order:  # loop over bins: balance mass between two groups
        g = 0 if mass[0] <= mass[1] else 1
        s[b] = 1.0 if g == 0 else -1.0
        mass[g] += pb[b]
    s -= np.dot(pb, s)  # exact balance: sum pb * s = 0
    c = 2.0 * eps / np.dot(pb, np.abs(s))
    if c * np.abs(s).max() >= 1:
        raise ValueError("deviation too large for this p")
    q = p * (1.0 + c * np.where(bin_of >= 0, s[np.maximum(bin_of, 0)], 0.0))
    qb = pb * (1 + c * s)
    w = np.sqrt(np.sum((qb - pb) ** 2 / pb))
    return q / q.sum(), float(w / (2 * eps))


def power(M: int, false_pass_rate: float = 0.1, false_fail_rate: float = 1e-3) -> dict:
    out = {}
    promised = 1 - false_pass_rate
    for label, p in (
        ("chisquare_gof pearson V=10 uniform", np.full(10, 0.1)),
        ("chisquare_gof pearson V=1000 zipf (pooled)", zipf(1000)),
        ("tokens_per_round k=4 law", np.array([0.35, 0.25, 0.18, 0.12, 0.10])),
    ):
        for eps in (0.01, 0.02, 0.05):
            t = time.time()
            n, B = st.plan_gof(p, eps, false_fail_rate, false_pass_rate)
            bin_of, pb = pool_bins(p, n, 20.0)
            q, ratio = least_favourable(p, bin_of, pb, eps)
            rng = np.random.default_rng(int(eps * 1e4))
            rej = sum(
                not st.assert_chisquare_gof(
                    counts=rng.multinomial(n, q),
                    p=p,
                    false_fail_rate=false_fail_rate,
                    false_pass_rate=false_pass_rate,
                ).passed
                for _ in range(M)
            )
            lo, hi = cp_interval(rej, M)
            out[f"{label} TV={eps}"] = {
                "planned_n": n,
                "n_bins": B,
                "w_over_2tv": ratio,
                "alpha": false_fail_rate,
                "promised_power": promised,
                "measured_power": rej / M,
                "ci95": [lo, hi],
                "ci99": list(cp_interval(rej, M, 0.99)),
                "seeds": M,
                "ok": bool(cp_interval(rej, M, 0.99)[1] >= promised),
                "seconds": round(time.time() - t, 2),
            }
            print(
                f"  power {label} TV={eps}: n={n} bins={B} power={rej / M:.3f} [{lo:.3f},{hi:.3f}]",
                flush=True,
            )
    # two-sample: n_a = n_b = 2 * n_eff
    p = np.full(10, 0.1)
    for eps in (0.01, 0.02, 0.05):
        t = time.time()
        n_eff = st.min_num_samples_chisquare_gof(eps, 10, false_fail_rate, false_pass_rate)
        na = 2 * n_eff
        q, ratio = least_favourable(p, np.arange(10), p, eps)
        rng = np.random.default_rng(7 + int(eps * 1e4))
        rej = 0
        for _ in range(M):
            a = np.repeat(np.arange(10), rng.multinomial(na, p))
            b = np.repeat(np.arange(10), rng.multinomial(na, q))
            rej += not st.assert_two_sample_chisquare(
                a, b, false_fail_rate, false_pass_rate=false_pass_rate
            ).passed
        lo, hi = cp_interval(rej, M)
        out[f"two_sample_chisquare V=10 uniform TV={eps}"] = {
            "planned_n_each": na,
            "n_eff": n_eff,
            "alpha": false_fail_rate,
            "promised_power": promised,
            "measured_power": rej / M,
            "ci95": [lo, hi],
            "seeds": M,
            "ok": bool(cp_interval(rej, M, 0.99)[1] >= promised),
            "seconds": round(time.time() - t, 2),
        }
        print(f"  power two-sample TV={eps}: n_each={na} power={rej / M:.3f}", flush=True)
    return out


def pit_ordering_power(M: int) -> dict:
    """Power of PIT tests against a temperature error (no promise; shows ordering matters)."""
    rng0 = np.random.default_rng(99)
    V, n, false_fail_rate = 200, 2000, 1e-3
    out = {}
    for temp in (1.05, 1.15):
        res = {}
        rng = np.random.default_rng(int(temp * 100))
        cnt = {k: 0 for k in ("ks/id", "ks/prob", "chisquare/id", "chisquare/prob")}
        for _ in range(M):
            logits = rng0.normal(0, 2.0, size=(n, V))
            P = np.exp(logits - logits.max(1, keepdims=True))
            P /= P.sum(1, keepdims=True)
            Q = np.exp(logits / temp - (logits / temp).max(1, keepdims=True))
            Q /= Q.sum(1, keepdims=True)
            x = inverse_cdf(Q, rng.random(n))
            for o in ("id", "prob"):
                u = st.pit_values(x, P, rng, o)
                cnt[f"ks/{o}"] += not st.assert_pit_uniform(u, false_fail_rate).passed
                cnt[f"chisquare/{o}"] += not st.assert_pit_uniform(
                    u, false_fail_rate, method="chisquare"
                ).passed
        for k, v in cnt.items():
            res[k] = {"power": v / M, "ci95": list(cp_interval(v, M))}
        out[f"temperature {temp} V={V} n={n} alpha={false_fail_rate}"] = res
        print(
            f"  pit temperature {temp}: "
            + ", ".join(f"{k}={v['power']:.2f}" for k, v in res.items()),
            flush=True,
        )
    return out


# ---------------------------------------------------------------- cost
def timeit(fn, reps: int = 5) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def cost() -> dict:
    out = {}
    n = 100_000
    rng = np.random.default_rng(0)
    for V in (10, 1000, 150_000):
        p = zipf(V)
        s = rng.choice(V, n, p=p)
        s2 = rng.choice(V, n, p=p)
        row = {
            "chisquare_gof pearson": timeit(lambda: st.assert_chisquare_gof(s, p, 1e-3)),
            "chisquare_gof g": timeit(lambda: st.assert_chisquare_gof(s, p, 1e-3, method="g")),
            "zero_probability_check": timeit(lambda: st.assert_within_support(s, p)),
            "two_sample_chisquare (n_a=n_b=1e5)": timeit(
                lambda: st.assert_two_sample_chisquare(s, s2, 1e-3)
            ),
        }
        npit = {10: 100_000, 1000: 10_000, 150_000: 100}[V]
        P = np.tile(p, (npit, 1))
        x = s[:npit]
        row[f"pit_values ordering=id (n={npit}, input {npit}x{V})"] = timeit(
            lambda: st.pit_values(x, P, 0, "id"), 3
        )
        row[f"pit_values ordering=prob (n={npit}, input {npit}x{V})"] = timeit(
            lambda: st.pit_values(x, P, 0, "prob"), 3
        )
        out[f"V={V}"] = {k: round(v, 5) for k, v in row.items()}
        print(f"  cost V={V}: {out[f'V={V}']}", flush=True)
    u = rng.random(n)
    law = np.array([0.35, 0.25, 0.18, 0.12, 0.10])
    N = rng.choice(np.arange(1, 6), n, p=law)
    out["V-independent (n=1e5)"] = {
        k: round(v, 5)
        for k, v in {
            "pit_uniformity ks": timeit(lambda: st.assert_pit_uniform(u, 1e-3)),
            "pit_uniformity chisquare": timeit(
                lambda: st.assert_pit_uniform(u, 1e-3, method="chisquare")
            ),
            "tokens_per_round": timeit(lambda: st.assert_tokens_per_round(N, law, 1e-3)),
            "mean_tokens": timeit(lambda: st.assert_mean_tokens(N, 2.37, 1.8, 1e-3)),
            "multinomial_exact_test exact V=4 n=20": timeit(
                lambda: st.assert_multinomial_exact(
                    counts=np.array([9, 6, 3, 2]), p=[0.5, 0.25, 0.15, 0.1], false_fail_rate=1e-3
                )
            ),
            "multinomial_exact_test MC V=10 n=50 alpha=1e-3 (20000 sims)": timeit(
                lambda: st.assert_multinomial_exact(
                    counts=np.full(10, 5), p=np.full(10, 0.1), false_fail_rate=1e-3
                )
            ),
            "required_samples (cold cache)": timeit(
                lambda: (
                    st.power._noncentrality.cache_clear(),
                    st.min_num_samples_chisquare_gof(0.01, 1000, 1e-8, 1e-3),
                )
            ),
        }.items()
    }
    print(f"  cost misc: {out['V-independent (n=1e5)']}", flush=True)
    return out


def lr_study(
    M: int, sims: int, false_pass_rate: float = 0.1, false_fail_rate: float = 1e-3
) -> dict:
    """The proven-tail test (method "lr"): null rejection rates (exact tail: 3 bins; Agrawal bound: 10 bins) and
    power at the n planned with tail="lr_bound" against least-favourable deviations."""
    out = {"null": {}, "power": {}}
    rng = np.random.default_rng(11)
    for label, p, n in (
        ("3 bins (exact tail)", np.array([0.5, 0.3, 0.2]), 300),
        ("10 bins zipf (bound)", zipf(10), 400),
    ):
        pv = np.array([lr_pvalue(c, p)[0] for c in rng.multinomial(n, p, size=sims)])
        out["null"][label] = {"n": n, "sims": sims, **rates(pv, (1e-2, 1e-3))}
        print(f"  lr null {label}: {out['null'][label]}", flush=True)
    for label, p in (("V=10 uniform", np.full(10, 0.1)), ("V=1000 zipf (pooled)", zipf(1000))):
        for eps in (0.02, 0.05):
            n, B = st.plan_gof(p, eps, false_fail_rate, false_pass_rate, tail="lr_bound")
            bin_of, pb = pool_bins(p, n, 20.0)
            q, _ = least_favourable(p, bin_of, pb, eps)
            rej = sum(
                not st.assert_multinomial_lr(
                    counts=rng.multinomial(n, q),
                    p=p,
                    false_fail_rate=false_fail_rate,
                    false_pass_rate=false_pass_rate,
                ).passed
                for _ in range(M)
            )
            ci99 = list(cp_interval(rej, M, 0.99))
            out["power"][f"{label} TV={eps}"] = {
                "planned_n": n,
                "n_bins": B,
                "promised_power": 1 - false_pass_rate,
                "measured_power": rej / M,
                "ci99": ci99,
                "seeds": M,
                "ok": bool(ci99[1] >= 1 - false_pass_rate),
            }
            print(f"  lr power {label} TV={eps}: n={n} bins={B} power={rej / M:.3f}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--seeds",
        type=int,
        default=2000,
        help="calibration seeds per test (>= 2000 for the record)",
    )
    ap.add_argument("--power-seeds", type=int, default=400)
    ap.add_argument("--tail-sims", type=int, default=2_000_000)
    ap.add_argument(
        "--out", default=str(Path(__file__).resolve().parent / "results" / "stat_calibration.json")
    )
    ap.add_argument(
        "--only-lr",
        action="store_true",
        help="only the proven-tail study (results/stat_calibration_lr.json)",
    )
    args = ap.parse_args()
    # the file, not this machine's folders
    settings = {
        **vars(args),
        "out": portable_path(args.out),
    }
    t0 = time.time()
    if args.only_lr:
        report = {"settings": settings, "lr": lr_study(args.power_seeds, args.seeds)}
        report["total_seconds"] = round(time.time() - t0, 1)
        out = Path(__file__).resolve().parent / "results" / "stat_calibration_lr.json"
        out.write_text(json.dumps(report, indent=1))
        print(f"wrote {out} in {report['total_seconds']} s")
        return
    report = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "statsmodels": statsmodels.__version__,
        },
        "settings": settings,
    }
    print("calibration", flush=True)
    report["calibration"] = calibration(args.seeds)
    print("tail study", flush=True)
    report["tail_study"] = tail_study(args.tail_sims, max(20_000, args.tail_sims // 10))
    print("power", flush=True)
    report["power"] = power(args.power_seeds)
    report["pit_ordering_power"] = pit_ordering_power(max(20, args.power_seeds // 10))
    print("cost", flush=True)
    report["cost_seconds"] = cost()
    report["total_seconds"] = round(time.time() - t0, 1)
    report["all_calibration_ok"] = all(
        v["ok"] for c in report["calibration"].values() for v in c["rates"].values()
    )
    report["all_power_ok"] = all(v["ok"] for v in report["power"].values())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(
        f"wrote {args.out} in {report['total_seconds']} s; calibration ok={report['all_calibration_ok']} "
        f"power ok={report['all_power_ok']}"
    )


if __name__ == "__main__":
    main()
