"""The words for what an engine certificate covers and how its routes rule deviations out: one source for the
certificates' Markdown (`engine.certificate`) and the docs (`conformance.docs`), built from `routes.QUANTITY`, the
route share of the false-pass rate and the verdicts' exit codes.
"""

from __future__ import annotations

from ...outcomes import Verdict
from .routes import ANY_SHAPE, QUANTITY
from .stat_checks import ROUTE_SHARE

#: The claims of proofs/ARGUMENT.md each route rests on (the docs check reads them against the argument).
ROUTE_CLAIMS = {"coupling": ("C16",), "law_any": ("C17",), "law_monotone": ("C14", "C15")}
ROUTE_TITLES = {
    "coupling": "Coupling",
    "law_any": "Law, any shape",
    "law_monotone": "Law, monotone",
}
#: How each route reaches its bound, and what it needs (`QUANTITY` says what it bounds).
ROUTE_HOW = {
    "coupling": (
        "seeds drawn at random from the engine's seed space, each asked at both ends: with k mismatched "
        "seeds in n, the bound is twice the Clopper–Pearson bound on the mismatch rate. It reads no report "
        "and suits engines that verify by sampler match (the same seed gives the same output at both ends); "
        "a mismatch disproves only the coupling, never exactness"
    ),
    "law_any": (
        "the candidate's tokens against the reference's reported law, prefix by prefix: its empirical law at a "
        "prefix it visits often bounds its true law in every direction (Bennett), and a token at a prefix seen "
        "too rarely counts as TV 1, so the bound reaches a target only where the candidate's prefixes come "
        "back (peaked continuations such as code or copying, or many completions)"
    ),
    "law_monotone": "twice the anytime bound of the stratified PIT drift; tokens without a report count as TV 1",
}


def coverage_text(positions: str = "1..max_tokens", prompts: str = "the prompts") -> str:
    """What a certificate covers: the prompts, the positions, the sampling settings and the load measured."""
    return (
        f"{prompts}, every position {positions} the run asked for, the sampling settings both ends were asked "
        "with, and the load the candidate was sampled under, as measured"
    )


def claims_text(route: str) -> str:
    return ", ".join(ROUTE_CLAIMS[route])


def route_lines() -> list[str]:
    """One Markdown bullet per route: its name, shape, the quantity it bounds, how, and its claims."""
    lines = []
    for route, quantity in QUANTITY.items():
        shape = "any shape" if route in ANY_SHAPE else "the monotone class"
        lines.append(
            f"- **{ROUTE_TITLES[route]}** (`{route}`; {shape}; proofs/ARGUMENT.md {claims_text(route)}). "
            f"It bounds the {quantity}. How: {ROUTE_HOW[route]}."
        )
    return lines


def verdict_rule_text() -> str:
    """Which route gives which verdict, with the exit codes (`Verdict.exit_code`)."""
    code = {v: int(v.exit_code) for v in Verdict}
    any_shape = " or ".join(f"`{r}`" for r in ANY_SHAPE)
    return (
        f"**CERTIFIED** (exit {code[Verdict.CERTIFIED]}) when every sampled prompt (or the pooled set) reaches "
        f"the profile's target by an any-shape route ({any_shape}); **QUALIFIED** (exit "
        f"{code[Verdict.QUALIFIED]}) when every one reaches it but some only by the monotone route: deviations of "
        "that class are ruled out, others are not, and the reasons say what would reach the any-shape bound; "
        f"**INCONCLUSIVE** (exit {code[Verdict.INCONCLUSIVE]}) when a prompt reaches it by no route, with the "
        f"completions or seeds that would; **NOT_EXACT** (exit {code[Verdict.NOT_EXACT]}) when a check fails. At "
        "temperature 0 the outputs are compared instead (`greedy_equality`, or `greedy_spread` where the "
        "reference itself varies with the seed). Each route spends "
        f"{_share()} the profile's false-pass rate."
    )


def _share() -> str:
    return {0.5: "half", 0.25: "a quarter of"}.get(ROUTE_SHARE, f"{ROUTE_SHARE:g} ×")


def routes_markdown() -> str:
    """The coverage, the three routes and the verdict rule: the paragraph every page and certificate index shows."""
    head = (
        f"A certificate covers exactly what it states: {coverage_text()}. The quantity is the candidate's "
        "next-token law given the observable prefix against the reference's, in total variation (TV) on the "
        "reported top-N and the tail. Three routes bound it:"
    )
    return "\n".join([head, "", *route_lines(), "", verdict_rule_text()])


__all__ = [
    "ROUTE_CLAIMS",
    "claims_text",
    "coverage_text",
    "route_lines",
    "routes_markdown",
    "verdict_rule_text",
]
