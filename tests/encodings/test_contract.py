"""The contract every registered encoding keeps, each in the host fixture of its ``requires`` (tests/encodings/
contract.py): gradients reach its parameters and they change the output; seeded determinism; inference mode equals
no_grad; a state-dict round trip into a fresh model; bf16 autocast finite and close to float32; float64 close to
float32; torch.compile with no graph break; a clear error where geometry it requires is missing (at build and at
run time); and every declared test-time option, set after a forward, gives the output of a model built with it.

With ``VISPE_CONTRACT_PLUGIN=<module>`` the same checks run on the encodings of that module's package instead (a plugin
package; ``test_plugin_encodings_keep_the_contract`` runs them so in a fresh interpreter).
"""
from __future__ import annotations

import copy
import importlib
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch._dynamo

import vispe
from vispe.encodings import EncodingHostError, Host, Option, check_encoding_fits
from vispe.encodings.builder import registered_encodings

from ..host_sync import as_on_a_gpu
from .contract import fixture_for

PLUGIN = os.environ.get('VISPE_CONTRACT_PLUGIN')
if PLUGIN:
    importlib.import_module(PLUGIN)


def cases() -> list[tuple[str, dict]]:
    """(type name, config) for every example of every registered encoding (of the plugin, with PLUGIN)."""
    found = []
    for name, cls in sorted(registered_encodings().items()):
        if PLUGIN and not cls.__module__.startswith(PLUGIN.split('.')[0]):
            continue
        for example in cls.examples:
            found.append((name, dict(type=name, **example)))
    return found


CASES = cases()
IDS = ['-'.join([name, *(f'{key}={value}' for key, value in cfg.items() if key != 'type')]) for name, cfg in CASES]


def fixture(name: str):
    return fixture_for(registered_encodings()[name])


def run(model: torch.nn.Module, inputs: tuple, **kwargs) -> torch.Tensor:
    torch.manual_seed(11)  # encodings that draw positions (RPE2D 'random') draw the same ones
    return model(*inputs, **kwargs)


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-12)).item()


@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_gradients_reach_every_parameter_and_each_changes_the_output(name, cfg) -> None:
    host = fixture(name)
    model = host.build(cfg).train()
    inputs = host.inputs(torch.float32)
    run(model, inputs).square().mean().backward()
    parameters = dict(model.encoding.named_parameters())
    for param_name, parameter in parameters.items():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, param_name
    model.eval()
    with torch.no_grad():
        before = run(model, inputs)
        for param_name, parameter in parameters.items():
            saved = parameter.clone()
            parameter.add_(torch.randn_like(parameter))
            assert not torch.equal(run(model, inputs), before), param_name
            parameter.copy_(saved)


@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_deterministic_under_a_seed_and_inference_mode_equals_no_grad(name, cfg) -> None:
    host = fixture(name)
    inputs = host.inputs(torch.float32)
    outputs = []
    for _ in range(2):
        with torch.no_grad():
            outputs.append(run(host.build(cfg, seed=7), inputs))
    assert torch.equal(outputs[0], outputs[1])
    model = host.build(cfg, seed=7)
    with torch.inference_mode():
        inference = run(model, inputs)
    with torch.no_grad():
        assert torch.equal(run(model, inputs), inference)
    run(model.train(), inputs).sum().backward()  # tables cached under inference mode do not enter autograd


@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_state_dict_round_trip_into_a_fresh_model(name, cfg) -> None:
    host = fixture(name)
    inputs = host.inputs(torch.float32)
    trained, fresh = host.build(cfg, seed=0), host.build(cfg, seed=1)
    with torch.no_grad():
        for parameter in trained.encoding.parameters():
            parameter.normal_()
        fresh.load_state_dict(trained.state_dict())
        assert torch.equal(run(fresh, inputs), run(trained, inputs))


@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_bf16_autocast_is_finite_and_close_and_float64_is_close(name, cfg) -> None:
    host = fixture(name)
    model = host.build(cfg)
    inputs = host.inputs(torch.float32)
    with torch.no_grad():
        reference = run(model, inputs)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            low = run(model, inputs)
        assert torch.isfinite(low).all()
        assert relative_error(low, reference) <= 0.05
        double = run(copy.deepcopy(model).double(), host.inputs(torch.float64))
    assert double.dtype == torch.float64
    assert relative_error(double, reference) <= 1e-4


@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_compiles_with_no_graph_break(name, cfg) -> None:
    host = fixture(name)
    model = host.build(cfg)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        explained = torch._dynamo.explain(model)(*host.inputs(torch.float32))
    reasons = [str(reason.reason).splitlines()[0] for reason in explained.break_reasons]
    assert explained.graph_break_count == 0, reasons


@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_missing_geometry_is_named_at_build_and_at_run_time(name, cfg) -> None:
    host = fixture(name)
    model = host.build(cfg)
    required = model.encoding.required_geometry()
    for missing in sorted(required):
        bare = Host('a host without ' + missing, provides=tuple(required - {missing}))
        with pytest.raises(EncodingHostError, match=f'requires .*{missing}.* but a host without {missing} provides'):
            check_encoding_fits(model.encoding, bare)
    if required - {'grid'}:
        with pytest.raises(ValueError) as caught, torch.no_grad():
            run(model, host.inputs(torch.float32), geometry=False)
        assert any(name in str(caught.value) for name in required - {'grid'}), caught.value


def other_value(option: Option, current):
    """A value of a test-time option other than ``current`` (the last search candidate, another choice, the
    other bool)."""
    if option.kind is bool:
        return not current
    if option.choices is not None:
        return [choice for choice in option.choices if choice != current][-1]
    return option.search.candidates(current)[-1]


TEST_TIME = [(name, cfg, path) for name, cfg in CASES
             for path in vispe.encodings.options.tunable_option_paths(
                 vispe.build_encoding(cfg, embed_dim=32, num_heads=4, head_dim=8, depth=2, grid_size=(4, 4),
                                      patch_size=(8, 8), num_prefix_tokens=1, in_channels=32))]


def owner_and_leaf(encoding: torch.nn.Module, path: str):
    *parents, leaf = path.split('.')
    owner = encoding
    for part in parents:
        owner = getattr(owner, part)
    return owner, leaf


def config_with(cfg: dict, path: str, value) -> dict:
    cfg = copy.deepcopy(cfg)
    *parents, leaf = path.split('.')
    target = cfg
    for part in parents:
        target[part] = {'type': target[part]} if isinstance(target[part], str) else target[part]
        target = target[part]
    target[leaf] = value
    return cfg


@pytest.mark.parametrize('name, cfg, path', TEST_TIME,
                         ids=[f'{IDS[CASES.index((name, cfg))]}-{path}' for name, cfg, path in TEST_TIME])
def test_a_test_time_option_set_after_a_forward_acts_as_if_built_with_it(name, cfg, path) -> None:
    """Cached tables are keyed by every declared test-time option: none is served stale."""
    host = fixture(name)
    inputs = host.inputs(torch.float32)
    model = host.build(cfg)
    owner, leaf = owner_and_leaf(model.encoding, path)
    value = other_value(type(owner).options[leaf], getattr(owner, leaf))
    with torch.no_grad():
        run(model, inputs)
        setattr(owner, leaf, value)
        changed = run(model, inputs)
        built = run(host.build(config_with(cfg, path, value)), inputs)
    torch.testing.assert_close(changed, built, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.skipif(bool(PLUGIN), reason='runs the suite on the plugin itself')
def test_plugin_encodings_keep_the_contract() -> None:
    """The example plugin package (tests/plugins) runs through this same suite, in a fresh interpreter."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, VISPE_CONTRACT_PLUGIN='vispe_example_plugin.factorized_ape',
               PYTHONPATH=os.pathsep.join([str(root / 'tests' / 'plugins' / 'vispe_example_plugin'), str(root)]))
    result = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-p', 'no:xdist',
                             str(Path(__file__).resolve())], cwd=root, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    passed = re.search(r'(\d+) passed', result.stdout)
    assert passed and int(passed.group(1)) >= 6, result.stdout[-2000:]


IMAGE_CASES = [(name, cfg) for name, cfg in CASES if not set(registered_encodings()[name].requires) - {'grid'}]


@pytest.mark.parametrize('name, cfg', IMAGE_CASES, ids=[IDS[CASES.index(case)] for case in IMAGE_CASES])
def test_quantization_config_propagates_through_a_vit(name, cfg) -> None:
    """torch.ao's propagate_qconfig_ sets a ``qconfig`` attribute on every module, the encoding's included."""
    vit = fixture(name).build(cfg).vit
    torch.ao.quantization.propagate_qconfig_(vit, {'': torch.ao.quantization.default_qconfig})
    assert vit.encoding.qconfig is not None


def test_a_hook_may_keep_state_on_the_encoding() -> None:
    """An encoding that declares options may still store what its hooks saw."""
    class Recording(vispe.encodings.RoPEAxial):
        def rotate(self, q, k, pos_q, pos_k, layer_idx):
            self.last_grid = pos_q.grid_size
            return super().rotate(q, k, pos_q, pos_k, layer_idx)

    vit = vispe.create_vit('vit_tiny_patch16_224', encoding=Recording(head_dim=8), img_size=32, patch_size=8,
                           embed_dim=32, depth=1, num_heads=4, num_classes=0)
    vit(torch.randn(1, 3, 24, 40))
    assert vit.encoding.last_grid == (3, 5)
    with pytest.raises(AttributeError, match="Recording has no option 'thetta'. Did you mean theta"):
        vit.encoding.thetta = 10.0


@pytest.mark.parametrize('mode', ['eval', 'train'])
@pytest.mark.parametrize('name, cfg', CASES, ids=IDS)
def test_a_forward_reads_nothing_back_to_the_host(name, cfg, mode) -> None:
    """As on a GPU (value checks skip device tensors; tests/host_sync.py): no value of a tensor goes back to Python
    during a forward, so the host never waits for the device."""
    host = fixture(name)
    model = host.build(cfg).train(mode == 'train')
    inputs = host.inputs(torch.float32)
    run(model, inputs)  # the tables kept across forwards are made
    with as_on_a_gpu():
        out = run(model, inputs)
    assert torch.isfinite(out).all()
