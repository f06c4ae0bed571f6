"""An adversarial `numpy.random.Generator`: a real Generator on a custom BitGenerator that
returns the boundary values of [0, 1) far more often than chance.

Why: the standard rule accepts x iff u < p(x)/q(x). An implementation that writes ``u <= p/q``
differs only when u == p/q, which for p(x) = 0 means u == 0.0 exactly -- probability 2**-53 per
float64 draw (2**-24 for float32), so no sample size can see it. Feeding exact 0.0 (and the largest
double below 1, which exposes inverse-CDF samplers that fall off the end of a cumulative sum that
rounds below 1) makes such boundary bugs visible in a few hundred rounds.

The BitGenerator is built with ctypes (a PyCapsule holding numpy's ``bitgen_t`` struct of four C
callbacks), so ``numpy.random.Generator(bitgen)`` accepts it and every Generator method
(``random``, ``integers``, ``choice``, ``random(dtype=float32)``...) draws from it.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from .reach import TrackingGenerator

_U64 = ctypes.c_uint64
_U32 = ctypes.c_uint32
_NEXT_U64 = ctypes.CFUNCTYPE(_U64, ctypes.c_void_p)
_NEXT_U32 = ctypes.CFUNCTYPE(_U32, ctypes.c_void_p)
_NEXT_DBL = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p)


class _BitgenT(ctypes.Structure):
    _fields_ = [
        ("state", ctypes.c_void_p),
        ("next_uint64", _NEXT_U64),
        ("next_uint32", _NEXT_U32),
        ("next_double", _NEXT_DBL),
        ("next_raw", _NEXT_U64),
    ]


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

#: The largest float64 below 1.
ONE_MINUS_ULP = float(np.nextafter(1.0, 0.0))

#: The extreme outputs the bit generator injects: event -> (what the implementation sees, how often a real
#: generator produces it per draw). numpy's random() is (u64 >> 11) * 2**-53; float32 uniforms (numpy's
#: random(dtype=float32), torch.rand) keep 24 bits; numpy's Exp(1) ziggurat returns 0 when 53 bits are 0.
EVENTS: dict[str, tuple[str, str]] = {
    "uniform_zero": (
        "a uniform of exactly 0.0",
        "2**-53 per float64 draw (numpy); 2**-24 per float32 torch.rand draw",
    ),
    "uniform_top": (
        "the largest float64 below 1, 1 - 2**-53, which rounds to 1.0 when cast to float32",
        "2**-53 per float64 draw; a float64 uniform rounds to a float32 1.0 with probability 2**-25",
    ),
    "uniform_tiny": ("the smallest positive uniform, 2**-53", "2**-53 per float64 draw"),
    "word_zero": (
        "an all-zero random word: a float32 uniform of 0.0, an Exp(1) draw of 0, the lowest integer",
        "2**-24 per float32 uniform draw; 2**-53 per numpy Exp(1) draw; 1/range per integer draw",
    ),
    "word_max": (
        "an all-ones random word: a float32 uniform of 1 - 2**-24, the highest integer",
        "2**-24 per float32 uniform draw; 1/range per integer draw",
    ),
}
_CAPSULE_NAME = ctypes.c_char_p(b"BitGenerator")


class AdversarialBitGenerator:
    """Bit source whose doubles are 0.0, 2**-53 or 1 - 2**-53 with probability `edge_rate`
    (split evenly) and otherwise uniform from an internal PCG64 stream; 32/64-bit words
    are 0 or all-ones with the same rate (so float32 uniforms hit 0.0 and 1 - 2**-24 too).
    Only the `events` named (keys of EVENTS) are injected; `emitted` counts each one."""

    def __init__(
        self, seed: int = 0, edge_rate: float = 0.25, events: tuple[str, ...] = tuple(EVENTS)
    ):
        unknown = set(events) - set(EVENTS)
        if unknown:
            raise ValueError(f"events must be names from {sorted(EVENTS)}, got {sorted(unknown)}")
        self._base = np.random.default_rng(seed)
        self.edge_rate = float(edge_rate)
        self.events = frozenset(events)
        self.emitted = dict.fromkeys(EVENTS, 0)  # extreme outputs produced so far, per event
        self.lock = threading.Lock()
        self._buf_d = np.empty(0)
        self._buf_pick = np.empty(0)
        self._buf_u64 = np.empty(0, dtype=np.uint64)
        self._i = 0
        self._refill()
        self._cb_u64 = _NEXT_U64(self._next_uint64)
        self._cb_u32 = _NEXT_U32(self._next_uint32)
        self._cb_dbl = _NEXT_DBL(self._next_double)
        self._cb_raw = _NEXT_U64(self._next_uint64)
        self._struct = _BitgenT(None, self._cb_u64, self._cb_u32, self._cb_dbl, self._cb_raw)
        self.capsule = _PyCapsule_New(ctypes.addressof(self._struct), _CAPSULE_NAME, None)

    def _refill(self, size: int = 65536) -> None:
        self._buf_d = self._base.random(size)
        self._buf_pick = self._base.random(size)
        self._buf_u64 = self._base.integers(0, 2**64 - 1, size=size, dtype=np.uint64, endpoint=True)
        self._i = 0

    def _step(self) -> tuple[float, float, int]:
        if self._i >= self._buf_d.size:
            self._refill()
        i = self._i
        self._i += 1
        return float(self._buf_pick[i]), float(self._buf_d[i]), int(self._buf_u64[i])

    def _edge(self, event: str) -> bool:
        if event in self.events:
            self.emitted[event] += 1
            return True
        return False

    @property
    def extremes(self) -> int:
        """Extreme outputs produced so far (all events)."""
        return sum(self.emitted.values())

    def _next_double(self, _state) -> float:
        pick, u, _ = self._step()
        e = self.edge_rate
        if pick < e / 3:
            return 0.0 if self._edge("uniform_zero") else u
        if pick < 2 * e / 3:
            return ONE_MINUS_ULP if self._edge("uniform_top") else u
        if pick < e:
            return 2.0**-53 if self._edge("uniform_tiny") else u
        return u

    def _next_uint64(self, _state) -> int:
        pick, _, w = self._step()
        if pick < self.edge_rate / 2:
            return 0 if self._edge("word_zero") else w
        if pick < self.edge_rate:
            return 2**64 - 1 if self._edge("word_max") else w
        return w

    def _next_uint32(self, _state) -> int:
        pick, _, w = self._step()
        if pick < self.edge_rate / 2:
            return 0 if self._edge("word_zero") else w >> 32
        if pick < self.edge_rate:
            return 2**32 - 1 if self._edge("word_max") else w >> 32
        return w >> 32


def adversarial_generator(
    seed: int = 0, edge_rate: float = 0.25, events: tuple[str, ...] = tuple(EVENTS)
) -> np.random.Generator:
    """A genuine `numpy.random.Generator` drawing from `AdversarialBitGenerator` that records which of its
    methods the implementation called (`conformance.reach`)."""
    bitgen = AdversarialBitGenerator(seed, edge_rate, events)
    # The Generator keeps a reference to its bit generator, hence to the ctypes callbacks.
    return TrackingGenerator(bitgen)  # type: ignore[arg-type]  # numpy takes any object with a `capsule`


def triggering_events(reproduces) -> list[dict]:
    """The adversarial events that alone reproduce a hard failure: `reproduces(events)` reruns the rounds with
    only those events injected and says whether the invariant still fails. Each with its real-world rate."""
    found = []
    for event, (what, rate) in EVENTS.items():
        if reproduces((event,)):
            found.append({"event": event, "what": what, "real_probability_per_draw": rate})
    return found
