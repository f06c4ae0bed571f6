"""Did the adversarial generator reach the implementation's comparisons?

`TrackingGenerator` is a genuine `numpy.random.Generator` (a subclass: `isinstance` checks pass) that
counts, per method, the calls, the values returned and how many of the bit generator's extreme outputs
(`adversarial.EVENTS`) went into them. A call that only draws a seed -- `integers` with a range of 2**31 or
more returning a handful of values, or `bytes` -- is counted apart: extremes spent on a seed never reach a
comparison, because the implementation's coins then come from its own generator. `reach_summary` turns
the counts into the report's finding; CONTRACT.md "Passing coins through" says how to write an adapter
that lets the extremes in.
"""

from __future__ import annotations

import numpy as np

#: Generator methods whose use is tracked (every sampling method an implementation is likely to call).
TRACKED = (
    "random",
    "integers",
    "uniform",
    "standard_exponential",
    "exponential",
    "gumbel",
    "choice",
    "standard_normal",
    "normal",
    "binomial",
    "multinomial",
    "permutation",
    "shuffle",
    "permuted",
    "bytes",
    "false_pass_rate",
    "gamma",
    "standard_gamma",
    "poisson",
    "geometric",
    "dirichlet",
)
SEED_RANGE = 2**31
SEED_VALUES = 4
CONTRACT_SECTION = 'conformance/CONTRACT.md, section "Passing coins through"'


def _seed_like(name: str, args: tuple, kwargs: dict, out) -> bool:
    if name == "bytes":
        return True
    if name != "integers" or np.size(out) > SEED_VALUES:
        return False
    low = kwargs.get("low", args[0] if args else 0)
    high = kwargs.get("high", args[1] if len(args) > 1 else None)
    span = low if high is None else high - low
    try:
        return int(np.max(span)) >= SEED_RANGE
    except (TypeError, ValueError):
        return False


def _tracked(name: str):
    base = getattr(np.random.Generator, name)

    def method(self, *args, **kwargs):
        bits = self.bit_generator
        before = getattr(bits, "extremes", 0)
        out = base(self, *args, **kwargs)
        self._note(name, args, kwargs, out, getattr(bits, "extremes", 0) - before)
        return out

    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


class TrackingGenerator(np.random.Generator):
    """A numpy Generator recording which methods were called and how many extreme outputs each took."""

    def _note(self, name: str, args: tuple, kwargs: dict, out, extremes: int) -> None:
        usage = self.__dict__.setdefault("usage", {})
        kind = "seed" if _seed_like(name, args, kwargs, out) else "draw"
        entry = usage.setdefault(name, {"calls": 0, "values": 0, "extremes": 0, "seed_calls": 0})
        entry["calls"] += 1
        entry["values"] += int(np.size(out)) if out is not None else 0
        if kind == "seed":
            entry["seed_calls"] += 1
        else:
            entry["extremes"] += int(extremes)


for _name in TRACKED:
    if hasattr(np.random.Generator, _name):
        setattr(TrackingGenerator, _name, _tracked(_name))


def reach_summary(rng: np.random.Generator) -> dict:
    """Whether the extremes reached the implementation: 'reached', 'not_reached' (seeds only or no draw)."""
    usage = dict(getattr(rng, "usage", {}) or {})
    delivered = sum(u["extremes"] for u in usage.values())
    seed_calls = sum(u["seed_calls"] for u in usage.values())
    draws = sum(u["calls"] - u["seed_calls"] for u in usage.values())
    methods = ", ".join(f"{m} x{u['calls']}" for m, u in usage.items())
    if delivered > 0:
        status = "reached"
        text = f"adversarial RNG reached: {delivered} extreme values went into the implementation's draws ({methods})"
    elif seed_calls and not draws:
        status = "not_reached"
        text = (
            f"adversarial RNG not reached: the implementation only drew seeds ({seed_calls} seed draws, e.g. "
            f"integers(2**63)) and took its coins from another generator, so exact 0.0 / 1 - 2**-53 coins never "
            f"met its comparisons; see {CONTRACT_SECTION}"
        )
    else:
        status = "not_reached"
        text = (
            f"adversarial RNG not reached: the implementation made {draws} draws but none took an extreme "
            f"value{'' if usage else ' (it never called the Generator)'}; see {CONTRACT_SECTION}"
        )
    return {
        "status": status,
        "reached": status == "reached",
        "extremes_delivered": delivered,
        "seed_calls": seed_calls,
        "methods": usage,
        "message": text,
    }
