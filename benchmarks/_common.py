"""Shared helpers for exactspec's benchmarks: machine description, prompts, timing, HF baselines, cost probes.

Every timing is reported as a ratio against a baseline measured in the same process, interleaved rep by
rep (baseline, candidate, baseline, candidate, ...), so that slow drifts of the machine cancel; each
figure is the median over the repetitions with its min and max (the spread).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
warnings.filterwarnings("ignore")

import torch  # noqa: E402

from exactspec.conformance.paths import portable_json  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# ---------------------------------------------------------------------------------------------------------
# Prompts: three kinds (code, summarisation of a given text, open chat)
# ---------------------------------------------------------------------------------------------------------

_CODE = """Add type hints to this Python code and return the whole code.

```python
def moving_average(values, window):
    if window <= 0:
        raise ValueError("window must be positive")
    result = []
    total = 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        if index >= window - 1:
            result.append(total / window)
    return result


def count_words(text):
    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts
```"""

_TEXT = (
    "The city council met on Tuesday to discuss the future of the old railway station. The building, which "
    "has been empty for twelve years, is owned by the city and costs about 80,000 euros a year to maintain. "
    "Three proposals were presented. The first would turn the station into a public library with a cafe; the "
    "second would sell it to a private developer who plans to build apartments; the third would convert it "
    "into a market hall for local farmers and craftspeople. Residents who spoke at the meeting mostly "
    "supported the library, saying the neighbourhood has no public space for children and students. The "
    "mayor said that the library would cost 4 million euros to build, while the sale would bring 2.5 million "
    "euros into the city budget. The council will vote on the proposals next month."
)

PROMPTS: dict[str, str] = {
    "code": _CODE,
    "summarisation": "Summarise the following text in three sentences.\n\n" + _TEXT,
    "chat": "What are some good habits for staying healthy while working from home? Explain why each one helps.",
}


def encode_prompt(tokenizer: Any, text: str, chat: bool = True) -> torch.Tensor:
    if chat and getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )["input_ids"]
    else:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
    return ids.long()


def left_pad(rows: list[torch.Tensor], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) of 1-D token tensors, left-padded to a common length (`gpu_impl.loop.prompts.left_pad`)."""
    from exactspec.gpu_impl.loop.prompts import left_pad as pad_rows

    return pad_rows([r.tolist() for r in rows], pad_id)


# ---------------------------------------------------------------------------------------------------------
# Machine description and result files
# ---------------------------------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    import transformers

    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cuda": torch.cuda.is_available(),
    }
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    try:
        info["load_average"] = os.getloadavg()
    except OSError:
        pass
    return info


def write_result(name: str, payload: dict[str, Any], out_dir: Path | None = None) -> Path:
    out_dir = Path(out_dir) if out_dir is not None else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    payload = json.loads(json.dumps({"machine": machine_info(), **payload}, default=_json_default))
    # no absolute path of this machine
    path.write_text(json.dumps(portable_json(payload), indent=2) + "\n")
    return path


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return str(value)


def spread(values: list[float]) -> dict[str, float]:
    values = [float(v) for v in values]
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "values": values,
    }


def log(*parts: Any) -> None:
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


# ---------------------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def interleaved(
    fns: dict[str, Callable[[], Any]], repeats: int
) -> dict[str, list[tuple[float, Any]]]:
    """Run each callable `repeats` times, interleaved (a, b, c, a, b, c, ...); returns {name: [(seconds, value)]}."""
    out: dict[str, list[tuple[float, Any]]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            out[name].append(timed(fn))
    return out


# ---------------------------------------------------------------------------------------------------------
# transformers baselines
# ---------------------------------------------------------------------------------------------------------


def hf_generate_kwargs(
    temperature: float, max_new_tokens: int, top_k: int | None = None, top_p: float = 1.0
) -> dict[str, Any]:
    """Kwargs for transformers.generate: no early stop (min_new_tokens = max_new_tokens), same warping as ours."""
    kwargs: dict[str, Any] = {
        "max_new_tokens": max_new_tokens,
        "min_new_tokens": max_new_tokens,
        "pad_token_id": 0,
    }
    if temperature == 0:
        kwargs.update(do_sample=False)
    else:
        kwargs.update(do_sample=True, temperature=temperature, top_k=top_k or 0, top_p=top_p)
    return kwargs


def hf_generate(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    seed: int,
    **kwargs: Any,
) -> int:
    """Run transformers.generate; returns the number of new tokens per row."""
    torch.manual_seed(seed)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    return int(out.shape[1] - input_ids.shape[1])


# ---------------------------------------------------------------------------------------------------------
# Cost probes: v(n) = time(target scores n tokens) / time(target scores 1 token), and c
# ---------------------------------------------------------------------------------------------------------


def _forward_cached(
    model: Any, input_ids: torch.Tensor, ns: list[int], repeats: int
) -> dict[int, list[float]]:
    """Seconds of one forward of n new tokens on top of a KV cache holding `input_ids`, for each n."""
    times: dict[int, list[float]] = {n: [] for n in ns}
    with torch.no_grad():
        out = model(input_ids, use_cache=True)
        cache = (
            out.cache if hasattr(out, "cache") and out.cache is not None else out.past_key_values
        )
        for n in ns:  # warm-up
            model(
                torch.full((input_ids.shape[0], n), 100, dtype=torch.long),
                cache=cache,
                use_cache=True,
            )
            cache.crop(-n)
        for _ in range(repeats):
            for n in ns:
                x = torch.full((input_ids.shape[0], n), 100, dtype=torch.long)
                start = time.perf_counter()
                model(x, cache=cache, use_cache=True)
                times[n].append(time.perf_counter() - start)
                cache.crop(-n)
    return times


def verification_costs(
    model: Any, input_ids: torch.Tensor, ns: list[int], repeats: int = 15
) -> dict[str, Any]:
    """v(n) for each n (median of per-rep ratios against the n = 1 forward of the same rep), with seconds."""
    ns_all = sorted(set([1, *ns]))
    times = _forward_cached(model, input_ids, ns_all, repeats)
    one = times[1]
    return {
        "t1_s": spread(one),
        "v": {str(n): spread([t / o for t, o in zip(times[n], one)]) for n in ns_all},
        "seconds": {str(n): spread(times[n]) for n in ns_all},
    }


def draft_cost_ratio(
    draft_model: Any, target: Any, input_ids: torch.Tensor, repeats: int = 15
) -> dict[str, Any]:
    """c = time(draft scores 1 token) / time(target scores 1 token), interleaved, median of per-rep ratios."""
    td: list[float] = []
    tt: list[float] = []
    for _ in range(repeats):
        td += _forward_cached(draft_model, input_ids, [1], 1)[1]
        tt += _forward_cached(target, input_ids, [1], 1)[1]
    return {
        "c": spread([d / t for d, t in zip(td, tt)]),
        "draft_s": spread(td),
        "target_s": spread(tt),
    }


@contextmanager
def kernels(mode: str, *models: Any) -> Iterator[None]:
    """Run the models' Linear layers with the CPU kernel plan `mode` ("auto" or "stock"), as CachedModel does."""
    from exactspec.gpu_impl.cost.cpu_matmul import cpu_plan, planned_layers, planned_linears

    linears = {
        id(m): m for model in models if model is not None for m in planned_layers(model, mode)[0]
    }
    with planned_linears(list(linears.values()), cpu_plan(mode)):
        yield
