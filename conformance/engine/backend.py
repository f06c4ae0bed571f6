"""The in-process engine seam: certify a Python inference library with no HTTP server.

An engine backend (what ``--engine-adapter MODULE:CLASS`` names) is a class with two methods (`EngineBackend`):

* ``complete(prompt_ids, seed, sampling, max_tokens) -> Completion``: one completion, sampled the way the engine
  samples, with its speculation counters (``draft_n``, ``draft_n_accepted``; None where the engine drafts nothing);
* ``report(prefix_ids, sampling, n) -> [(token_id, probability), ...]``: the engine's next-token law after
  ``prefix_ids`` (prompt and generated tokens), after the whole sampler chain (temperature, top-k, top-p, min-p):
  its ``n`` most probable tokens, most probable first.

``exactspec engine certify --engine-adapter module:Class`` builds ``Class(role="reference", **options)`` (the engine
with speculation off) and ``Class(role="candidate", **options)`` (on), once each per process, and certifies them as
it certifies two HTTP endpoints: same rounds, statistics, certificate and exit codes. Optional members:
``tokenize(text) -> ids`` (prompts given as text), ``chat_tokenize(messages) -> ids``, ``name``, ``version``,
``model_name``, ``thread_safe`` (default False: calls are serialised). Seeds are drawn at random from
[0, 2**32 - 2], as for llama.cpp: a backend maps them onto its engine's seeds. (The name says what it is: the
engine behind the seam; "adapter" elsewhere in exactspec is the rule, sequence and tree levels' `verify` objects.)
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

ROLES = ("reference", "candidate")


@dataclass(frozen=True)
class Sampling:
    """The law both ends are asked for: softmax(logits / temperature) after top-k (0 = off), top-p, min-p; with
    temperature 0, greedy. ``ignore_eos``: keep generating past the end-of-generation token."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    ignore_eos: bool = False


@dataclass(frozen=True)
class Completion:
    """What ``complete`` returns: the generated ids (the end token included when it stopped there)."""

    tokens: Sequence[int]
    stopped_by_eos: bool = False
    draft_n: int | None = None
    draft_n_accepted: int | None = None


@runtime_checkable
class EngineBackend(Protocol):
    """The two methods every engine backend has (see the module's docstring for the optional ones)."""

    def complete(
        self, prompt_ids: list[int], seed: int, sampling: Sampling, max_tokens: int
    ) -> Completion: ...

    def report(
        self, prefix_ids: list[int], sampling: Sampling, n: int
    ) -> list[tuple[int, float]]: ...


def top_n(probs: np.ndarray, n: int) -> list[tuple[int, float]]:
    """A `report`'s answer from a full next-token law: its n most probable tokens (ties by id), zeros left out."""
    order = np.lexsort((np.arange(probs.size), -probs))[:n]
    return [(int(t), float(probs[t])) for t in order if probs[t] > 0]


def parse_options(items: Sequence[str]) -> dict[str, str]:
    """``key=value`` strings (``--adapter-option``) as a dict (ValueError naming the bad item)."""
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--adapter-option: {item!r} is not key=value")
        options[key.strip()] = value
    return options


def _import_class(spec: str) -> type:
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise ValueError(f"--engine-adapter: {spec!r} is not module:Class")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"--engine-adapter: cannot import {module_name!r}: {error}") from None
    try:
        found = getattr(module, class_name)
    except AttributeError:
        raise ValueError(f"--engine-adapter: {module_name!r} has no {class_name!r}") from None
    if not isinstance(found, type):
        raise ValueError(f"--engine-adapter: {spec!r} is not a class")
    return found


_INSTANCES: dict[tuple[str, str, tuple], Any] = {}
_BUILDING = threading.Lock()


def load_backend(spec: str, role: str, options: dict[str, str] | None = None) -> Any:
    """The engine backend for `role` built from `spec` (module:Class) with `options`, built once per process (models are
    expensive to load); ValueError naming the argument when it cannot be built or lacks a method."""
    if role not in ROLES:
        raise ValueError(f"role: {role!r} must be one of {ROLES}")
    key = (spec, role, tuple(sorted((options or {}).items())))
    with _BUILDING:
        if key not in _INSTANCES:
            adapter_class = _import_class(spec)
            try:
                adapter = adapter_class(role=role, **(options or {}))
            except TypeError as error:
                raise ValueError(
                    f"--engine-adapter: {spec}(role={role!r}, ...) failed: {error}"
                ) from None
            missing = [m for m in ("complete", "report") if not callable(getattr(adapter, m, None))]
            if missing:
                raise ValueError(f"--engine-adapter: {spec} has no {' or '.join(missing)} method")
            _INSTANCES[key] = adapter
        return _INSTANCES[key]


__all__ = ["Completion", "EngineBackend", "Sampling", "load_backend", "parse_options", "top_n"]
