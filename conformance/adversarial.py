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
_CAPSULE_NAME = ctypes.c_char_p(b"BitGenerator")


class AdversarialBitGenerator:
    """Bit source whose doubles are 0.0, 2**-53 or 1 - 2**-53 with probability `edge_rate`
    (split evenly) and otherwise uniform from an internal PCG64 stream; 32/64-bit words
    are 0 or all-ones with the same rate (so float32 uniforms hit 0.0 and 1 - 2**-24 too)."""

    def __init__(self, seed: int = 0, edge_rate: float = 0.25):
        self._base = np.random.default_rng(seed)
        self.edge_rate = float(edge_rate)
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

    def _next_double(self, _state) -> float:
        pick, u, _ = self._step()
        e = self.edge_rate
        if pick < e / 3:
            return 0.0
        if pick < 2 * e / 3:
            return ONE_MINUS_ULP
        if pick < e:
            return 2.0**-53
        return u

    def _next_uint64(self, _state) -> int:
        pick, _, w = self._step()
        if pick < self.edge_rate / 2:
            return 0
        if pick < self.edge_rate:
            return 2**64 - 1
        return w

    def _next_uint32(self, _state) -> int:
        pick, _, w = self._step()
        if pick < self.edge_rate / 2:
            return 0
        if pick < self.edge_rate:
            return 2**32 - 1
        return w >> 32


def adversarial_generator(seed: int = 0, edge_rate: float = 0.25) -> np.random.Generator:
    """A genuine `numpy.random.Generator` drawing from `AdversarialBitGenerator`."""
    bitgen = AdversarialBitGenerator(seed, edge_rate)
    # The Generator keeps a reference to its bit generator, hence to the ctypes callbacks.
    return np.random.Generator(bitgen)
