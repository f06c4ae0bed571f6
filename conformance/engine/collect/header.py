"""The header of one role's sample file, from the collection plan: the engine's identity and flags, the model, the
pinned request defaults, the prompts and the design (seeds, in-flight requests, load).

Paths of this machine in the flags and in the engine's props are recorded portably (`paths.portable_path`): the
same flags give the same header entries in both roles' files.
"""

from __future__ import annotations

from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ...paths import portable_args, portable_path
from .. import samples
from .design import design_record
from .plan import CollectionPlan

#: /props fields that hold a path of the serving machine (llama.cpp: the GGUF; its alias defaults to it).
PROPS_PATHS = ("model_path", "model_alias")


def exactspec_version() -> str:
    try:
        return version("exactspec")
    except PackageNotFoundError:
        return "unknown"


def build_header(
    role: str,
    url: str,
    plan: CollectionPlan,
    props: dict | None,
    prompts: dict[str, list[int]],
    seed_key: str | None = None,
) -> samples.Header:
    """The header of `role`'s file sampled at `url` (`props`: what the engine says of itself; `seed_key`: the run's
    key, default the plan's)."""
    identity = plan.identity
    flags = portable_args(
        list(identity.engine_flags)
        + (list(identity.candidate_flags) if role == "candidate" else [])
    )
    props = props or {}
    model_path = props.get("model_path") or props.get("model_alias") or ""
    props = {
        key: portable_path(value) if key in PROPS_PATHS and isinstance(value, str) else value
        for key, value in props.items()
    }
    engine = {
        "name": identity.engine_name or plan.transport.plugin.name,
        "version": identity.engine_version or props.get("build_info"),
        "base_url": url,
        "flags": flags or None,
        "speculation": identity.speculation if role == "candidate" else None,
        "props": props or None,
    }
    model = {
        "name": identity.model_name or Path(model_path).name or "unknown",
        "sha256": identity.model_sha256,
    }
    key = seed_key or plan.seeds.key
    if plan.seeds.kind == "random" and not key:
        raise ValueError(
            "seed_key: a run with random seeds needs its key (`design.resolve_seed_key`)"
        )
    # an in-process engine that is not thread-safe answers one call at a time
    in_flight = 1 if props.get("calls") == "serialised" else plan.transport.concurrency
    design = design_record(
        plan.seeds.kind, plan.transport.plugin.capabilities.seed_space, key, in_flight
    )
    load = plan.load_design()
    if load is not None:
        design["load"] = load
    return samples.Header(
        role=role,
        engine=engine,
        model=model,
        request_defaults=plan.request_defaults(),
        prompts={pid: tuple(tokens) for pid, tokens in prompts.items()},
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        exactspec_version=exactspec_version(),
        design=design,
    )


__all__ = ["PROPS_PATHS", "build_header", "exactspec_version"]
