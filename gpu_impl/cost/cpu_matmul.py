"""Faster CPU kernels for decoding's skinny products: M rows (M = batch x tokens per forward) times a big weight.

Why: a decoding forward multiplies a handful of rows (1 for a plain step, k+1 for a verification) by every
weight, so it should run at memory bandwidth.  On some CPU BLAS builds `torch.nn.functional.linear`
(x @ W^T) takes a slow path at small M, while the same product written (W @ x^T)^T (with one zero row
added for M = 1 and 3) does not.  oneDNN's linear on a weight packed once into its blocked layout
("packed") costs nearly the same for every small M, so wide verifications cost about what a plain step
does.  The packed copy is made once per weight and kept beside its module (a second copy of the planned
weights in memory; float32 and bfloat16 only).  Which formulation wins depends on the CPU and the BLAS, so
the choice is measured once per machine (per thread count and torch version) and cached beside the models.
The figures: benchmarks/README.md#smollm2-speed ("CPU kernels", "Packed weights").

Every kernel computes the same product; they differ only in float summation order (rounding), so a plan
changes no law: plain and speculative decoding run the same model through the same plan.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from ...cache import CPU_PLAN_VERSION
from ..models import cache_dir

KERNELS = ("linear", "mm", "mm_pad", "packed")
#: The row count oneDNN packs weights for (a layout hint; any row count runs on the packed weight).
PACK_ROWS = 8
MAX_TUNED_ROWS = (
    16  # every row count up to this is timed; above it, a few (a prefill's) stand for the rest
)
#: The weights the plan is timed on, shaped like a transformer block's: an attention projection and the MLP's
#: up and down projections.  (A 4:1 shape alone misled: it favoured "mm" at 2-4 rows, which ran SmolLM2's
#: 3:1 MLP weights slower than "packed".)
BLOCK_SHAPES = ((1024, 1024), (2816, 1024), (1024, 2816))
#: Row counts above MAX_TUNED_ROWS the plan also times; a larger count runs the kernel of the nearest below.
WIDE_ROWS = (32, 64, 128)
CPU_MATMUL_CHOICES = ("auto", "stock")
#: Weights smaller than this (256 KB in float32) stay in cache, where every kernel is fast and the plan's
#: Python wrapper would only add overhead (benchmarks/README.md#cpu-kernels-threads-and-the-quantized-draft).
MIN_PLANNED_ELEMENTS = 2**16


def packing_available() -> bool:
    """Whether this torch build has oneDNN's packed-weight linear (x86 and ARM CPU builds with mkldnn)."""
    return torch.backends.mkldnn.is_available() and hasattr(
        torch.ops.mkldnn, "_reorder_linear_weight"
    )


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """`weight` (out, in) in oneDNN's blocked layout, for `skinny_product("packed", ...)`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS)


def packable(weight: torch.Tensor) -> bool:
    """Whether "packed" serves this weight: oneDNN's CPU linear takes float32 and bfloat16 (other dtypes,
    e.g. float16 without AVX512-FP16, run F.linear)."""
    return weight.dtype in (torch.float32, torch.bfloat16)


def _version(weight: torch.Tensor) -> int | None:
    try:
        return weight._version
    # an inference tensor keeps no version counter (and cannot be changed in place)
    except RuntimeError:
        return None


#: Each planned module's packed weight, with the weight and version it was packed from; kept beside the
#: module (not on it, so copying or pickling a model never meets a oneDNN tensor) and freed with it.
_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def module_packed_weight(module: torch.nn.Linear) -> torch.Tensor:
    """The module's weight packed once; packed again when the weight is replaced or changed in place."""
    weight = module.weight
    held = _PACKED.get(module)
    if held is None or held[0] is not weight or held[1] != _version(weight):
        held = (weight, _version(weight), pack_weight(weight))
        _PACKED[module] = held
    return held[2]


def skinny_product(
    kernel: str, x: torch.Tensor, weight: torch.Tensor, packed: torch.Tensor | None = None
) -> torch.Tensor:
    """x (M, in) @ weight (out, in)^T with the named kernel -> (M, out).

    "linear": F.linear; "mm": (W @ x^T)^T on contiguous rows; "mm_pad": the same with one zero row added
    (an even row count sometimes selects a faster BLAS path; the extra row is dropped); "packed": oneDNN's
    linear on `packed` (`pack_weight(weight)`, packed here when not given).
    """
    if kernel == "linear":
        return torch.nn.functional.linear(x, weight)
    if kernel == "packed":
        packed = pack_weight(weight) if packed is None else packed
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, None, "none", [], "")
    rows = x.shape[0]
    x = torch.cat([x, x.new_zeros(1, x.shape[1])]) if kernel == "mm_pad" else x.contiguous()
    return torch.mm(weight, x.t()).t()[:rows]


def kernel_for(plan: dict[int, str], rows: int) -> str:
    """The plan's kernel for `rows`: its own entry, else that of the largest planned count below, else F.linear."""
    if rows in plan:
        return plan[rows]
    below = [n for n in plan if n < rows]
    return plan[max(below)] if below else "linear"


def _linear_forward(module: torch.nn.Linear, plan: dict[int, str]):
    weight, bias = module.weight, module.bias
    # once per layer, not per call: the captured weight's dtype does not change
    can_pack = packable(weight)

    def forward(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        kernel = kernel_for(plan, flat.shape[0])
        if kernel == "linear" or x.dtype != weight.dtype or (kernel == "packed" and not can_pack):
            return torch.nn.functional.linear(x, weight, bias)
        out = skinny_product(
            kernel, flat, weight, module_packed_weight(module) if kernel == "packed" else None
        )
        if bias is not None:
            out = out + bias
        return out.reshape(*x.shape[:-1], weight.shape[0])

    return forward


def plain_linears(model: torch.nn.Module, min_elements: int = 0) -> list[torch.nn.Linear]:
    """The model's exact `nn.Linear` modules with float CPU weights of at least `min_elements` entries.

    Quantized or subclassed layers, and layers whose forward is already wrapped per instance (e.g. by
    accelerate hooks), are left alone."""
    return [
        m
        for m in model.modules()
        if type(m) is torch.nn.Linear
        and m.weight.device.type == "cpu"
        and m.weight.is_floating_point()
        and m.weight.numel() >= min_elements
        and "forward" not in m.__dict__
    ]


def planned_layers(
    model: torch.nn.Module, cpu_matmul: str = "auto"
) -> tuple[list[torch.nn.Linear], dict[int, str] | None]:
    """The Linear layers worth a plan (CPU, >= MIN_PLANNED_ELEMENTS weights) and the plan; ([], None) if none.
    Weights the plan runs packed are packed here, once per module."""
    plan = cpu_plan(cpu_matmul) if next(model.parameters()).device.type == "cpu" else None
    linears = plain_linears(model, MIN_PLANNED_ELEMENTS) if plan else []
    # pack now (~0.5 s for 135M weights), not inside a timed forward
    if plan and "packed" in plan.values():
        for module in filter(lambda m: packable(m.weight), linears):
            module_packed_weight(module)
    return linears, plan if linears else None


@contextmanager
def planned_linears(linears: list[torch.nn.Linear], plan: dict[int, str] | None) -> Iterator[None]:
    """Run the given Linear modules through `plan` inside the block; the modules are restored on exit."""
    if not plan or not linears:
        yield
        return
    for m in linears:
        m.forward = _linear_forward(m, plan)
    try:
        yield
    finally:
        for m in linears:
            del m.forward


def available_kernels() -> tuple[str, ...]:
    return KERNELS if packing_available() else tuple(k for k in KERNELS if k != "packed")


def _time_kernels(
    rows: int, weights: list[torch.Tensor], packed: list[torch.Tensor | None], reps: int
) -> dict[str, float]:
    """Median seconds per kernel of one product with every weight (packing is done once, outside the timing)."""
    inputs = {w.shape[1]: torch.randn(rows, w.shape[1]) for w in weights}
    times: dict[str, list[float]] = {k: [] for k in available_kernels()}
    for _ in range(reps + 1):  # the first pass warms up and is dropped
        for kernel in times:
            start = time.perf_counter()
            for w, p in zip(weights, packed):
                skinny_product(kernel, inputs[w.shape[1]], w, p)
            times[kernel].append(time.perf_counter() - start)
    return {k: statistics.median(v[1:]) for k, v in times.items()}


def measure_plan(
    max_rows: int = MAX_TUNED_ROWS,
    reps: int = 5,
    seconds: dict | None = None,
    wide_rows: tuple[int, ...] = WIDE_ROWS,
) -> dict[int, str]:
    """Fastest kernel per row count 1..max_rows and `wide_rows` (a prefill's), timed on three blocks of
    BLOCK_SHAPES weights (81 MB in float32, more than a CPU cache holds).

    `seconds`, when given, receives every timing ({rows: {kernel: s}}) for reports.
    """
    with torch.inference_mode():
        generator = torch.Generator().manual_seed(0)
        weights = [
            torch.randn(rows, cols, generator=generator)
            for _ in range(3)
            for rows, cols in BLOCK_SHAPES
        ]
        packed = [pack_weight(w) if packing_available() else None for w in weights]
        plan = {}
        for rows in [*range(1, max_rows + 1), *wide_rows]:
            timing = _time_kernels(rows, weights, packed, reps)
            if seconds is not None:
                seconds[rows] = timing
            best = min(timing, key=timing.get)
            # keep F.linear unless another kernel is clearly (> 10%) faster: no churn on noise
            plan[rows] = best if timing[best] < 0.9 * timing["linear"] else "linear"
    return plan


def _plan_file() -> Path:
    # plan files from before the "packed" kernel never chose it: the version in the name measures it again
    key = f"v{CPU_PLAN_VERSION}-{platform.machine()}-{_cpu_name()}-torch{torch.__version__}-threads{torch.get_num_threads()}"
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in key)
    return cache_dir() / "cpu_matmul" / f"{safe}.json"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


_PLANS: dict[Path, dict[int, str]] = {}


def cpu_plan(cpu_matmul: str = "auto") -> dict[int, str] | None:
    """The kernel plan for this machine ("auto": measured once, then read from the cache), or None ("stock")."""
    if cpu_matmul not in CPU_MATMUL_CHOICES:
        raise ValueError(f"cpu_matmul must be one of {CPU_MATMUL_CHOICES}, got {cpu_matmul!r}")
    if cpu_matmul == "stock":
        return None
    path = _plan_file()
    if path not in _PLANS:
        try:
            _PLANS[path] = {
                int(r): k
                for r, k in json.loads(path.read_text())["plan"].items()
                if k in available_kernels()
            }
        except (OSError, ValueError, KeyError, AttributeError):
            plan = measure_plan()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                json.dumps({"plan": plan, "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=1)
            )
            _PLANS[path] = plan
    return _PLANS[path]
