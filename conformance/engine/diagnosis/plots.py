"""The diagnosis's pictures (PNG, matplotlib's Agg backend), written beside a NOT_EXACT certificate:

* `diagnosis_prefix.png`: at the worst recurring prefix, the reference's reported law against the candidate's
  frequencies with their 95 % Wilson intervals (and the reference's own frequencies where it visited the prefix);
* `diagnosis_positions.png`: by position, the best family's gain over exact for the candidate and for the
  reference's own tokens (the control), and the temperature each behaves like with its interval;
* `diagnosis_load.png` (when the tokens carry load labels): the temperature fit of the serial and the loaded tokens.
"""

from __future__ import annotations

from pathlib import Path


def _pyplot():
    # matplotlib takes seconds to import: only a NOT_EXACT's pictures need it
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): no display needed

    return plt


def _prefix_plot(plt, prefix: dict, path: Path) -> None:
    rows = prefix["categories"]
    x = range(len(rows))
    n, ref_n = prefix["visits"], prefix["reference_visits"]
    freq = [r["candidate"] / n for r in rows]
    low = [f - r["candidate_interval"][0] for f, r in zip(freq, rows)]
    high = [r["candidate_interval"][1] - f for f, r in zip(freq, rows)]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(
        [i - 0.2 for i in x],
        [r["reported"] for r in rows],
        width=0.4,
        label="reference: reported law",
    )
    ax.bar(
        [i + 0.2 for i in x],
        freq,
        width=0.4,
        yerr=[low, high],
        capsize=3,
        label=f"candidate (n = {n}), 95 %",
    )
    if ref_n:
        ax.plot(
            list(x),
            [r["reference"] / ref_n for r in rows],
            "k.",
            label=f"reference's own (n = {ref_n})",
        )
    ax.set_xticks(list(x), [str(r["token"]) for r in rows])
    ax.set_xlabel("token id")
    ax.set_ylabel("probability")
    ax.set_title(
        f"{prefix['prompt']}, position {prefix['position']}: prefix {prefix['prefix'][-6:]}"
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _behaves_like(fit: dict, temperature: float | None) -> tuple[float, float, float]:
    """(value, low, high) of a temperature fit as the temperature it behaves like (theta itself without a T)."""
    value, (low, high) = fit["value"], fit["interval"]
    if not temperature:
        return value, low, high
    return temperature / value, temperature / high, temperature / low


def _positions_plot(plt, diagnosis: dict, temperature: float | None, path: Path) -> None:
    entries = diagnosis["by_position"]
    positions = [e["position"] for e in entries]
    fig, (gain_ax, temp_ax) = plt.subplots(1, 2, figsize=(10, 3.5))
    for role, style in (("candidate", "o-"), ("reference", "s--")):
        gain_ax.plot(
            positions,
            [e[role].get("best", {}).get("gain_nats", 0.0) for e in entries],
            style,
            label=role,
        )
        fits = [e[role].get("temperature") for e in entries]
        shown = [(p, _behaves_like(f, temperature)) for p, f in zip(positions, fits) if f]
        xs, ys = [p for p, _ in shown], [v[0] for _, v in shown]
        errs = [[v[0] - v[1] for _, v in shown], [v[2] - v[0] for _, v in shown]]
        temp_ax.errorbar(xs, ys, yerr=errs, fmt=style, capsize=2, label=role)
    gain_ax.axhline(diagnosis["where"]["threshold_nats"], color="grey", lw=0.8, ls=":")
    for ax in (gain_ax, temp_ax):
        ax.set_xticks(positions)
    gain_ax.set_xlabel("position")
    gain_ax.set_ylabel("best family's gain over exact (nats)")
    gain_ax.legend(fontsize=7)
    if temperature:
        temp_ax.axhline(temperature, color="grey", lw=0.8, ls=":")
    temp_ax.set_xlabel("position")
    temp_ax.set_ylabel("temperature it behaves like" if temperature else "theta (q ~ p^theta)")
    temp_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _load_plot(plt, load: dict, temperature: float | None, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(4, 3))
    for i, name in enumerate(("serial", "loaded")):
        value, low, high = _behaves_like(load[name], temperature)
        ax.errorbar([i], [value], yerr=[[value - low], [high - value]], fmt="o", capsize=4)
    ax.set_xticks([0, 1], ["serial", "loaded"])
    ax.set_ylabel("temperature it behaves like" if temperature else "theta")
    ax.set_title(f"fitting apart gains {load['split_gain_nats']:.3g} nats")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def diagnosis_plots(diagnosis: dict, out: Path, temperature: float | None = None) -> list[str]:
    """Write the diagnosis's PNGs into `out`; their file names (none without tokens to show)."""
    if not diagnosis.get("tokens"):
        return []
    plt = _pyplot()
    files = []
    if diagnosis.get("prefixes"):
        _prefix_plot(plt, diagnosis["prefixes"][0], out / "diagnosis_prefix.png")
        files.append("diagnosis_prefix.png")
    if diagnosis.get("by_position"):
        _positions_plot(plt, diagnosis, temperature, out / "diagnosis_positions.png")
        files.append("diagnosis_positions.png")
    if diagnosis.get("load"):
        _load_plot(plt, diagnosis["load"], temperature, out / "diagnosis_load.png")
        files.append("diagnosis_load.png")
    return files


__all__ = ["diagnosis_plots"]
