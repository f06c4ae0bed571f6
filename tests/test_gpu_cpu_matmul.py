"""CPU Linear kernel plans: every kernel computes F.linear's product, plans are cached, modules are restored."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from exactspec.gpu_impl.cost import cpu_matmul
from exactspec.gpu_impl.cost.cpu_matmul import (
    KERNELS,
    cpu_plan,
    measure_plan,
    plain_linears,
    planned_linears,
    skinny_product,
)
from exactspec.gpu_impl.loop.kv import CachedModel
from tests.tiny_models import scaled_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8])
def test_every_kernel_computes_the_linear_product(kernel, rows):
    if kernel == "packed" and not cpu_matmul.packing_available():
        pytest.skip("this torch build has no oneDNN packed linear")
    generator = torch.Generator().manual_seed(rows)
    weight = torch.randn(40, 24, generator=generator)
    # a strided view, as attention outputs can be
    x = torch.randn(rows, 48, generator=generator)[:, ::2]
    out = skinny_product(kernel, x, weight)
    assert out.shape == (rows, 40)
    torch.testing.assert_close(out, torch.nn.functional.linear(x, weight), rtol=1e-5, atol=1e-5)


def test_planned_linears_match_stock_and_are_restored_even_on_error():
    model = scaled_llama(0, layers=2)
    linears = plain_linears(model)
    assert len(linears) == 2 * 7 + 1  # q k v o gate up down per layer, and lm_head
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    with torch.no_grad():
        stock = model(ids).logits
        plan = {n: "mm_pad" if n % 2 else "mm" for n in range(1, 17)}
        with planned_linears(linears, plan):
            assert all("forward" in m.__dict__ for m in linears)
            planned = model(ids).logits
        with pytest.raises(RuntimeError), planned_linears(linears, plan):
            raise RuntimeError("boom")
    assert not any("forward" in m.__dict__ for m in linears)
    torch.testing.assert_close(planned, stock, rtol=1e-4, atol=1e-4)


def test_subclassed_and_quantized_layers_are_left_alone():
    class Custom(torch.nn.Linear):
        pass

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Custom(4, 4), torch.nn.Linear(4, 4))
    model[2].forward = lambda x: x  # wrapped by someone else (e.g. an accelerate hook)
    assert plain_linears(model) == [model[0]]


def test_small_weights_are_left_to_f_linear():
    # every weight < MIN_PLANNED_ELEMENTS
    assert CachedModel(scaled_llama(1, layers=2), "auto").plan is None
    assert plain_linears(scaled_llama(1, layers=2), cpu_matmul.MIN_PLANNED_ELEMENTS) == []


def test_cached_model_logits_equal_stock_ones(monkeypatch):
    monkeypatch.setattr(cpu_matmul, "MIN_PLANNED_ELEMENTS", 0)  # plan even the tiny model's layers
    model = scaled_llama(1, layers=2)
    ids = torch.tensor([[3, 1, 4, 1, 5, 9]])
    outs = {}
    for mode in ("stock", "auto"):
        cached = CachedModel(model, mode)
        cached.reset(1)
        outs[mode] = torch.cat([cached.forward(ids[:, :4]), cached.forward(ids[:, 4:])], dim=1)
    assert CachedModel(model, "stock").plan is None and CachedModel(model, "auto").plan is not None
    torch.testing.assert_close(outs["auto"], outs["stock"], rtol=1e-4, atol=1e-4)


def test_plan_is_measured_once_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    monkeypatch.setattr(cpu_matmul, "_PLANS", {})
    calls = []
    monkeypatch.setattr(
        cpu_matmul, "measure_plan", lambda: calls.append(1) or {1: "mm_pad", 2: "mm"}
    )
    assert cpu_plan("auto") == {1: "mm_pad", 2: "mm"}
    files = list(tmp_path.rglob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["plan"] == {
        "1": "mm_pad",
        "2": "mm",
    }
    monkeypatch.setattr(cpu_matmul, "_PLANS", {})  # a new process reads the file
    assert cpu_plan("auto") == {1: "mm_pad", 2: "mm"} and len(calls) == 1
    files[0].write_text("not json")  # a damaged cache is measured again
    monkeypatch.setattr(cpu_matmul, "_PLANS", {})
    assert cpu_plan("auto") == {1: "mm_pad", 2: "mm"} and len(calls) == 2


def test_stock_and_bad_choices():
    assert cpu_plan("stock") is None
    with pytest.raises(ValueError, match="cpu_matmul must be one of"):
        cpu_plan("fast")


def test_measure_plan_names_a_kernel_for_every_row_count():
    seconds = {}
    plan = measure_plan(max_rows=3, reps=1, seconds=seconds, wide_rows=(24,))
    assert sorted(plan) == [1, 2, 3, 24] and set(plan.values()) <= set(KERNELS)
    for rows, kernel in plan.items():  # a kernel other than F.linear must have been > 10% faster
        assert kernel == "linear" or seconds[rows][kernel] < 0.9 * seconds[rows]["linear"]


@pytest.mark.skipif(
    not cpu_matmul.packing_available(), reason="this torch build has no oneDNN packed linear"
)
def test_packed_weights_follow_their_module_and_are_packed_again_when_it_changes(monkeypatch):
    monkeypatch.setattr(cpu_matmul, "MIN_PLANNED_ELEMENTS", 0)
    model = scaled_llama(2, layers=2)
    linears = plain_linears(model)
    ids = torch.tensor([[2, 7, 1, 8, 2]])
    plan = {n: "packed" for n in range(1, 17)}
    with torch.no_grad():
        stock = model(ids).logits
        with planned_linears(linears, plan):
            torch.testing.assert_close(model(ids).logits, stock, rtol=1e-4, atol=1e-4)
        first = cpu_matmul.module_packed_weight(linears[0])
        assert cpu_matmul.module_packed_weight(linears[0]) is first  # packed once
        linears[0].weight.mul_(2)  # changed in place: packed again, and the product follows
        assert cpu_matmul.module_packed_weight(linears[0]) is not first
        x = torch.randn(3, linears[0].in_features)
        torch.testing.assert_close(
            skinny_product(
                "packed", x, linears[0].weight, cpu_matmul.module_packed_weight(linears[0])
            ),
            torch.nn.functional.linear(x, linears[0].weight),
            rtol=1e-5,
            atol=1e-5,
        )
        # replaced: packed again
        linears[1].weight = torch.nn.Parameter(torch.zeros_like(linears[1].weight))
        assert not cpu_matmul.module_packed_weight(linears[1]).to_dense().any()
    # the packed copies live beside the modules, so a used model still copies
    clone = copy.deepcopy(model)
    assert clone is not model and len(plain_linears(clone)) == len(linears)


def test_plans_from_before_the_packed_kernel_are_not_read(tmp_path, monkeypatch):
    monkeypatch.setenv("EXACTSPEC_CACHE", str(tmp_path))
    assert cpu_matmul._plan_file().name.startswith(f"v{cpu_matmul.CPU_PLAN_VERSION}-")


def test_a_row_count_outside_the_plan_runs_the_kernel_of_the_nearest_planned_count_below():
    plan = {1: "mm_pad", 2: "mm", 16: "packed", 64: "linear"}
    assert [cpu_matmul.kernel_for(plan, n) for n in (1, 2, 3, 16, 40, 64, 500)] == [
        "mm_pad",
        "mm",
        "mm",
        "packed",
        "packed",
        "linear",
        "linear",
    ]
    assert cpu_matmul.kernel_for({4: "mm"}, 2) == "linear"


def test_weights_oneDNN_cannot_pack_run_f_linear(monkeypatch):
    monkeypatch.setattr(cpu_matmul, "MIN_PLANNED_ELEMENTS", 0)
    layer = torch.nn.Linear(8, 6).double()  # float64: not packable
    assert not cpu_matmul.packable(layer.weight) and cpu_matmul.packable(
        torch.zeros(1, dtype=torch.bfloat16)
    )
    x = torch.randn(3, 8, dtype=torch.float64)
    with torch.no_grad(), planned_linears([layer], {n: "packed" for n in range(1, 17)}):
        out = layer(x)
    torch.testing.assert_close(out, torch.nn.functional.linear(x, layer.weight, layer.bias))
