"""The load a collection measured: how many requests of one role were in flight, from each request's own interval.

A certificate states the load its candidate was sampled under, and what a client asks (``--concurrency C``) is not
what a server sees: a client busy with its own work sends the next request only after handling the last answer, and
a fast engine then sees one request at a time. So every completion record carries when its request was sent and
when its answer arrived (``sent_at``, ``received_at``: wall-clock seconds, one timeline for both roles and every
round), and the load is measured from those intervals alone: for each request, the most requests of its role open
at once while it was open (itself included: its *peak in flight*), as a distribution; the time-weighted mean number
in flight while any request of the group was open; the share of requests that overlapped at least one other.
Background requests (``--background-load``: ``background`` records) are requests of the candidate's role too.

`measure` is the measurement; `is_serial` the design's choice of the seeds sampled one request at a time and
`load_segments` the order the collector sends them in;
`role_load`, `load_paragraph` (the certificate's text), `load_record` (its JSON) and `progress_note` read a pair of
sample files (any objects with the `samples.SampleFile` attributes). Pure Python, torch-free and httpx-free.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

Interval = tuple[float, float]  # (sent_at, received_at), wall-clock seconds
LOAD_LABELS = ("serial", "loaded")
#: Slack of the serial rule's floors, so that a share such as 0.1 picks every tenth index despite rounding.
_EPS = 1e-9


@dataclass(frozen=True)
class Background:
    """A sample file's ``background`` record: requests sent to the candidate beside a run of its loaded ones
    (``--background-load``), with other sampling; not samples, only their load: (sent_at, received_at) of each
    request sent, how many of them failed, the sampling they asked."""

    intervals: tuple[Interval, ...]
    failed: int = 0
    sampling: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "kind": "background",
            "intervals": [list(i) for i in self.intervals],
            "failed": self.failed,
            "sampling": self.sampling,
        }


def parse_background(record: dict, at: Any) -> Background:
    """A ``background`` record, validated with the reader's `at` (`samples._Where`: errors name file, line, field)."""
    intervals = at.get(record, "intervals", (list,))
    for number, pair in enumerate(intervals):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise at.error(f"intervals[{number}]", f"expected [sent_at, received_at], got {pair!r}")
    pairs = tuple(
        at.interval(*pair, f"intervals[{number}].") for number, pair in enumerate(intervals)
    )
    failed = at.get(record, "failed", (int,), optional=True) or 0
    if not 0 <= failed <= len(pairs):
        raise at.error("failed", f"must lie in [0, {len(pairs)}] (the requests sent), got {failed}")
    return Background(pairs, failed, at.get(record, "sampling", (dict,), optional=True) or {})


def check_load_design(load: dict | None, at: Any) -> None:
    """A header's ``design.load``: {"concurrency": int >= 1, "serial_share": F in [0, 1], "background": null or
    {"in_flight": int >= 1, "sampling": {...}}, "reference_concurrency": int >= 1} (the last three optional; errors
    through the reader's `at`)."""
    if load is None:
        return
    concurrency, share, background = (
        load.get("concurrency"),
        load.get("serial_share", 0),
        load.get("background"),
    )
    for name, value in (
        ("concurrency", concurrency),
        ("reference_concurrency", load.get("reference_concurrency", 1)),
    ):
        if isinstance(value, bool) or not (isinstance(value, int) and value >= 1):
            raise at.error(f"design.load.{name}", f"must be an integer >= 1, got {value!r}")
    if isinstance(share, bool) or not (isinstance(share, (int, float)) and 0 <= share <= 1):
        raise at.error("design.load.serial_share", f"must be a number in [0, 1], got {share!r}")
    if background is not None and not (
        isinstance(background, dict)
        and isinstance(background.get("in_flight"), int)
        and background["in_flight"] >= 1
    ):
        raise at.error(
            "design.load.background",
            f"must be null or {{'in_flight': int >= 1, ...}}, got {background!r}",
        )


def is_serial(index: int, share: float) -> bool:
    """Whether the design samples seed `index` (its place in the seed list) one request at a time: index i is serial
    when floor((i + 1) F) > floor(i F), so any first n indices hold floor(n F) serial ones (F = 0.25: 3, 7, 11, ...).
    Decided by the index alone, before any sampling."""
    return math.floor((index + 1) * share + _EPS) > math.floor(index * share + _EPS)


@dataclass(frozen=True)
class Segment:
    """Jobs sent `wave` at a time (a wave's requests together), labelled "loaded" or "serial"."""

    jobs: list
    wave: int
    label: str


#: Seed indices per block of `load_segments` at least (round 1 asks 32 per prompt).
BLOCK_INDICES = 32


def load_segments(
    items: list[Any],
    place: Callable[[Any], tuple[int, int]],
    share: float,
    concurrency: int,
    prompts: int,
) -> list[Segment]:
    """A role's jobs as the load design says: blocks of consecutive seed indices (`place(item)`: (repeat, index)),
    each its loaded jobs in waves of `concurrency` then its serial ones alone (`is_serial`; share 0: none); a block
    holds enough loaded jobs for several full waves, so serial and loaded requests alternate through the run."""
    block = (
        max(BLOCK_INDICES, math.ceil(4 * concurrency / (prompts * (1 - share))))
        if share < 1
        else BLOCK_INDICES
    )

    def order(item: Any) -> tuple[int, int, bool, int]:
        repeat, index = place(item)
        return repeat, index // block, is_serial(index, share), index

    return [
        Segment(list(group), 1 if serial else concurrency, "serial" if serial else "loaded")
        for serial, group in groupby(sorted(items, key=order), key=lambda item: order(item)[2])
    ]


def _steps(pool: Sequence[Interval]) -> tuple[list[float], list[int]]:
    """The number of `pool` intervals open, as a step function: after all events at times[i], counts[i] are open.
    An interval ending when another starts does not overlap it (ends are counted first)."""
    events = sorted([(s, 1) for s, _ in pool] + [(r, -1) for _, r in pool])
    times: list[float] = []
    counts: list[int] = []
    open_now = 0
    for time, delta in events:
        open_now += delta
        if times and times[-1] == time:
            counts[-1] = open_now
        else:
            times.append(time)
            counts.append(open_now)
    return times, counts


def peak_in_flight(subjects: Sequence[Interval], pool: Sequence[Interval]) -> list[int]:
    """For each subject interval, the most `pool` intervals open at once at any time while it was (from its sending
    to its answer); a subject that is in `pool` counts itself."""
    times, counts = _steps(pool)
    peaks = []
    for sent, received in subjects:
        first = bisect_right(times, sent) - 1
        last = max(first + 1, bisect_left(times, received))
        peaks.append(max(counts[max(first, 0) : last], default=0))
    return peaks


def mean_in_flight(cover: Sequence[Interval], pool: Sequence[Interval]) -> float | None:
    """The time-weighted mean number of `pool` intervals open while any `cover` interval was (None when the cover
    has no duration)."""
    events = sorted(
        [(s, 1, 0) for s, _ in pool]
        + [(r, -1, 0) for _, r in pool]
        + [(s, 0, 1) for s, _ in cover]
        + [(r, 0, -1) for _, r in cover]
    )
    area = span = 0.0
    open_pool = open_cover = 0
    for i, (time, delta_pool, delta_cover) in enumerate(events):
        open_pool, open_cover = open_pool + delta_pool, open_cover + delta_cover
        if open_cover > 0 and i + 1 < len(events):
            width = events[i + 1][0] - time
            area, span = area + open_pool * width, span + width
    return area / span if span > 0 else None


@dataclass(frozen=True)
class MeasuredLoad:
    """The load one group of requests was measured under (requests without both times are `unmeasured`)."""

    requests: int
    unmeasured: int
    in_flight: dict[int, int]  # peak number in flight (the request itself included) -> requests
    mean_in_flight: float | None
    overlapped_share: float | None  # share of the requests that had at least one other open

    def share_at_least(self, n: int) -> float | None:
        """The share of the measured requests whose peak in flight reached `n`."""
        return (
            sum(c for k, c in self.in_flight.items() if k >= n) / self.requests
            if self.requests
            else None
        )

    def to_dict(self) -> dict:
        return {
            "requests": self.requests,
            "unmeasured": self.unmeasured,
            "in_flight": {str(k): v for k, v in sorted(self.in_flight.items())},
            "mean_in_flight": None
            if self.mean_in_flight is None
            else round(self.mean_in_flight, 4),
            "overlapped_share": None
            if self.overlapped_share is None
            else round(self.overlapped_share, 4),
        }


def measure(
    subjects: Sequence[Interval], pool: Sequence[Interval] | None = None, unmeasured: int = 0
) -> MeasuredLoad:
    """The load `subjects` were under among `pool` (every request of the role, the subjects included; default: the
    subjects alone)."""
    pool = subjects if pool is None else pool
    # a request of no duration counts itself
    peaks = [max(peak, 1) for peak in peak_in_flight(subjects, pool)]
    counts: dict[int, int] = {}
    for peak in peaks:
        counts[peak] = counts.get(peak, 0) + 1
    overlapped = sum(1 for peak in peaks if peak >= 2) / len(peaks) if peaks else None
    return MeasuredLoad(len(peaks), unmeasured, counts, mean_in_flight(subjects, pool), overlapped)


def _interval(record: Any) -> Interval | None:
    sent, received = getattr(record, "sent_at", None), getattr(record, "received_at", None)
    return None if sent is None or received is None else (float(sent), float(received))


def role_load(sample_file: Any) -> dict[str, MeasuredLoad]:
    """The load a role's requests were measured under: ``all`` completions, and where the records say so the
    ``loaded`` and ``serial`` ones, each among every request of the role (background requests included);
    ``background``: the background requests' own load among all of them."""
    groups: dict[str, list[Interval]] = {"all": []}
    missing: dict[str, int] = {"all": 0}
    for record in sample_file.completions:
        label, interval = getattr(record, "load", None), _interval(record)
        for group in ("all", label) if label else ("all",):
            groups.setdefault(group, [])
            missing.setdefault(group, 0)
            if interval is None:
                missing[group] += 1
            else:
                groups[group].append(interval)
    background = [
        tuple(i) for record in getattr(sample_file, "background", []) for i in record.intervals
    ]
    pool = groups["all"] + background
    out = {group: measure(intervals, pool, missing[group]) for group, intervals in groups.items()}
    if background:
        out["background"] = measure(background, pool)
    return out


def _asked(header: Any) -> dict:
    """The load a file's design asked of its role: {"concurrency", and the candidate's "serial_share",
    "background"} (what the header says)."""
    design = header.design or {}
    load = dict(design.get("load") or {})
    load.setdefault("concurrency", design.get("concurrency"))
    if header.role == "reference":
        return {"concurrency": load.get("reference_concurrency", load["concurrency"])}
    load.pop("reference_concurrency", None)
    return load


def _percent(share: float | None) -> str:
    return "—" if share is None else f"{100 * share:.0f}%"


def _group_text(name: str, load: MeasuredLoad, asked: int | None) -> str:
    """One group's measured load: its peak in flight as counts, the share that reached what was asked (for serial
    requests: the share that was alone), its mean in flight."""
    if not load.requests:
        return f"{name}: not measured ({load.unmeasured} records without sent_at and received_at)"
    spread = ", ".join(f"{k}: {v}" for k, v in sorted(load.in_flight.items()))
    if name == "serial":
        alone = load.in_flight.get(1, 0) / load.requests
        return (
            f"serial ({load.requests} requests): {_percent(alone)} alone (peak in flight {spread})"
        )
    mean = "—" if load.mean_in_flight is None else f"{load.mean_in_flight:.2f}"
    reached = (
        f", {_percent(load.share_at_least(asked))} reached {asked}" if asked and asked > 1 else ""
    )
    return (
        f"{name} ({load.requests} requests): peak in flight {spread}{reached}; mean {mean} in flight; "
        f"{_percent(load.overlapped_share)} overlapped another"
    )


def _background_text(sample_file: Any, measured: MeasuredLoad | None) -> str:
    """The background requests measured: how many, how many failed, their mean in flight while loaded requests
    were."""
    if measured is None:
        return "background: none measured"
    records = getattr(sample_file, "background", [])
    loaded = [_interval(c) for c in sample_file.completions if getattr(c, "load", None) == "loaded"]
    during = mean_in_flight(
        [i for i in loaded if i], [tuple(i) for r in records for i in r.intervals]
    )
    return (
        f"background: {measured.requests} requests ({sum(r.failed for r in records)} failed), mean "
        + ("—" if during is None else f"{during:.2f}")
        + " in flight while loaded requests were"
    )


def _asked_text(asked: dict) -> str:
    concurrency = asked.get("concurrency")
    text = f"asked {concurrency if concurrency else 'an unstated number of requests'} in flight"
    extras = []
    if asked.get("serial_share"):
        extras.append(f"a share {asked['serial_share']:g} of the seeds one at a time")
    background = asked.get("background")
    if background:
        sampling = ",".join(f"{k}={v}" for k, v in (background.get("sampling") or {}).items())
        extras.append(f"background {background.get('in_flight')} in flight at {sampling}")
    return text + (f" ({'; '.join(extras)})" if extras else "")


def role_paragraph(role: str, sample_file: Any) -> str:
    """One role's sentence: what its design asked, what was measured."""
    asked, measured = _asked(sample_file.header), role_load(sample_file)
    groups: list[str] = [g for g in ("loaded", "serial") if g in measured] or ["all"]
    parts = [_group_text(group, measured[group], asked.get("concurrency")) for group in groups]
    if asked.get("background"):
        parts.append(_background_text(sample_file, measured.get("background")))
    return f"{role}: {_asked_text(asked)}; measured: " + "; ".join(parts)


def load_paragraph(reference: Any, candidate: Any) -> str:
    """The certificate's paragraph on load: each role's asked and measured load."""
    return (
        "measured from each request's sending and answer times: "
        + role_paragraph("candidate", candidate)
        + ". "
        + role_paragraph("reference", reference)
        + "."
    )


def load_record(reference: Any, candidate: Any) -> dict:
    """The certificate's JSON on load: per role, what its design asked and what each group measured."""
    return {
        role: {
            "asked": _asked(f.header),
            "measured": {g: m.to_dict() for g, m in role_load(f).items()},
        }
        for role, f in (("candidate", candidate), ("reference", reference))
    }


def progress_note(candidate: Any) -> str:
    """A short note for a progress line: the candidate's measured mean in flight (its loaded requests where
    labelled)."""
    measured = role_load(candidate)
    group = measured.get("loaded") or measured["all"]
    mean = group.mean_in_flight
    return (
        "candidate in flight: not measured"
        if mean is None
        else f"candidate in flight: mean {mean:.1f}"
    )


__all__ = [
    "LOAD_LABELS",
    "Background",
    "MeasuredLoad",
    "Segment",
    "check_load_design",
    "is_serial",
    "load_paragraph",
    "load_record",
    "load_segments",
    "mean_in_flight",
    "measure",
    "peak_in_flight",
    "progress_note",
    "role_load",
    "role_paragraph",
]
