"""Every registered encoding in its host on CUDA: forward and backward equal the CPU's, bf16 autocast finite and
close to float32, torch.compile with no graph break, FlexAttention equal to SDPA; and no forward waits for the host
(``torch.cuda.set_sync_debug_mode('error')``)."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo

from ..encodings.test_contract import CASES, IDS, fixture, relative_error, run
from .conftest import to_device

KERNEL_CASES = [(name, cfg) for name, cfg in CASES if name in ('LookHere', 'ALiBi2D', 'iRPE')]


def on_cuda(name: str, cfg: dict) -> tuple[torch.nn.Module, tuple]:
    host = fixture(name)
    return host.build(cfg).cuda(), to_device(host.inputs(torch.float32), 'cuda')


@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_forward_and_backward_equal_the_cpus(name, cfg) -> None:
    host = fixture(name)
    cpu_model = host.build(cfg)
    reference = run(cpu_model, host.inputs(torch.float32))
    reference.square().mean().backward()
    model, inputs = on_cuda(name, cfg)
    out = run(model, inputs)
    out.square().mean().backward()
    assert relative_error(out.cpu(), reference) <= 1e-4
    for (param_name, cpu_param), param in zip(cpu_model.named_parameters(), model.parameters()):
        if cpu_param.grad is not None:
            assert relative_error(param.grad.cpu(), cpu_param.grad) <= 1e-3, param_name


@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_bf16_autocast_is_finite_and_close(name, cfg) -> None:
    model, inputs = on_cuda(name, cfg)
    with torch.no_grad():
        reference = run(model, inputs)
        with torch.autocast('cuda', dtype=torch.bfloat16):
            low = run(model, inputs)
    assert torch.isfinite(low).all() and relative_error(low.float(), reference) <= 0.05


@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_compiles_on_cuda_with_no_graph_break(name, cfg) -> None:
    model, inputs = on_cuda(name, cfg)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        explained = torch._dynamo.explain(model)(*inputs)
    assert explained.graph_break_count == 0, [str(reason.reason).splitlines()[0]
                                              for reason in explained.break_reasons]


@pytest.mark.parametrize('name, cfg', KERNEL_CASES, ids=[f'{name}-{cfg}' for name, cfg in KERNEL_CASES])
def test_flex_attention_equals_sdpa(name, cfg) -> None:
    outputs = {}
    for kernel in ('sdpa', 'flex'):
        model, inputs = on_cuda(name, dict(cfg, kernel=kernel))
        with torch.no_grad():
            outputs[kernel] = run(model, inputs)
    assert relative_error(outputs['flex'], outputs['sdpa']) <= 1e-4


@pytest.mark.parametrize('mode', ['eval', 'train'])
@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_a_forward_never_waits_for_the_host(name, cfg, mode) -> None:
    model, inputs = on_cuda(name, cfg)
    model.train(mode == 'train')
    run(model, inputs)  # tables and constants made once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('error')
    try:
        run(model, inputs)
    finally:
        torch.cuda.set_sync_debug_mode('default')
