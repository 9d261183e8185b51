"""Encoding options are declared once and checked at every entry: construction, configs, test-time
attributes and ``tools/eval_resolution.py --encoding-options``.

Every refusal is checked for its exception type and for a message that names the option, shows the
value seen and says what to pass.
"""
from __future__ import annotations

import copy
import inspect
import io
import math

import numpy as np
import pytest
import torch
from torch import nn

import vispe
from vispe.evaluation.encoding_options import option_owners, set_encoding_options
from vispe.encodings import ComRoPE, LookHere, Option, PositionEncoding, RoPEAxial, check_test_time_option
from vispe.geometry import Positions
from vispe.registry import ENCODINGS

from ..helpers import load_tool

CONTEXT = dict(embed_dim=32, num_heads=4, head_dim=8, depth=2, grid_size=(4, 4), patch_size=(4, 4),
               num_prefix_tokens=1, in_channels=16)
REGISTERED = {name: cls for name, cls in sorted(ENCODINGS.module_dict.items())
              if isinstance(cls, type) and issubclass(cls, PositionEncoding)}
EXAMPLES = [(name, options) for name, cls in REGISTERED.items() for options in cls.examples]
BUILT_IN = ('ALiBi2D', 'ComRoPE', 'DETRSine', 'FourierFeatures', 'LearnedAPE', 'LookHere', 'MultiViewSine', 'NoPE',
            'PEG', 'PETR', 'PPE3D', 'RPE2D', 'RoPEAxial', 'RoPEMixed', 'SinCos2D', 'iRPE')
NAN, INF = float('nan'), float('inf')


def build(type_name: str, **options) -> PositionEncoding:
    return vispe.build_encoding(dict(type=type_name, **options), **CONTEXT)


def assert_names_option_value_and_fix(message: str, name: str, value: str, fix: str) -> None:
    assert f'option {name} must be' in message, message
    assert f'got {value}' in message, message
    assert fix in message, message


# (encoding, options, error, option, value as shown, fix in the message)
BAD_BUILDS = [
    ('RoPEAxial', dict(theta=-1.0), ValueError, 'theta', '-1.0', 'a finite number > 0'),
    ('RoPEAxial', dict(theta=0), ValueError, 'theta', '0', 'rope-vit uses 100'),
    ('RoPEAxial', dict(theta=NAN), ValueError, 'theta', 'nan', 'a finite number > 0'),
    ('RoPEAxial', dict(theta=INF), ValueError, 'theta', 'inf', 'a finite number > 0'),
    ('RoPEAxial', dict(theta='100'), TypeError, 'theta', "'100' (str)", 'a finite number > 0'),
    ('RoPEAxial', dict(theta=True), TypeError, 'theta', 'True (bool)', 'a finite number > 0'),
    ('RoPEAxial', dict(position_scale=0.0), ValueError, 'position_scale', '0.0', 'train_grid / test_grid'),
    ('RoPEAxial', dict(head_dim=6), ValueError, 'head_dim', '6', 'divisible by 4'),
    ('RoPEMixed', dict(theta=-10.0), ValueError, 'theta', '-10.0', 'rope-vit uses 10'),
    ('RoPEMixed', dict(random_angles=1), TypeError, 'random_angles', '1 (int)', 'True or False'),
    ('RoPEMixed', dict(position_scale=-1), ValueError, 'position_scale', '-1', 'a finite number > 0'),
    ('RoPEMixed', dict(depth=0), ValueError, 'depth', '0', 'an int >= 1'),
    ('LookHere', dict(global_slope=-0.5), ValueError, 'global_slope', '-0.5', 'a finite number >= 0'),
    ('LookHere', dict(global_slope=NAN), ValueError, 'global_slope', 'nan', 'a finite number >= 0'),
    ('LookHere', dict(layer_slopes=(1.5,)), ValueError, 'layer_slopes', '(1.5,) (length 1)', 'a sequence of 2 items'),
    ('LookHere', dict(layer_slopes=(1.5, 0.5, 0.1)), ValueError, 'layer_slopes', '(1.5, 0.5, 0.1) (length 3)',
     'a sequence of 2 items'),
    ('LookHere', dict(layer_slopes=(1.5, -0.5)), ValueError, 'layer_slopes', '(1.5, -0.5) (item 1 is -0.5)',
     'each a finite number >= 0'),
    ('LookHere', dict(layer_slopes=(1.5, INF)), ValueError, 'layer_slopes', '(1.5, inf) (item 1 is inf)',
     'each a finite number >= 0'),
    ('LookHere', dict(layer_slopes=1.5), TypeError, 'layer_slopes', '1.5 (float)', 'a sequence of 2 items'),
    ('LookHere', dict(layer_slopes=('1.5', 0.5)), TypeError, 'layer_slopes', "('1.5', 0.5) (tuple) (item 0 is '1.5')",
     'each a finite number >= 0'),
    ('LookHere', dict(distance='sqr'), ValueError, 'distance', "'sqr'", "Did you mean 'sqrt'"),
    ('LookHere', dict(fill_with='Inf'), ValueError, 'fill_with', "'Inf'", "Did you mean 'inf'"),
    ('LookHere', dict(reference_rounding='yes'), TypeError, 'reference_rounding', "'yes' (str)", 'True or False'),
    ('LookHere', dict(num_prefix_tokens=-1), ValueError, 'num_prefix_tokens', '-1', 'an int >= 0'),
    ('LookHere', dict(depth=0), ValueError, 'depth', '0', 'an int >= 1'),
    ('ComRoPE', dict(block_size=0), ValueError, 'block_size', '0', 'an int >= 1'),
    ('ComRoPE', dict(block_size=2.0), TypeError, 'block_size', '2.0 (float)', 'an int >= 1'),
    ('ComRoPE', dict(num_heads=0), ValueError, 'num_heads', '0', 'an int >= 1'),
    ('ComRoPE', dict(variant='ap'), ValueError, 'variant', "'ap'", "Did you mean 'AP'"),
    ('ComRoPE', dict(init_std=-1.0), ValueError, 'init_std', '-1.0', 'a finite number >= 0'),
    ('ComRoPE', dict(perturbation=NAN), ValueError, 'perturbation', 'nan', 'a finite number >= 0'),
    ('ComRoPE', dict(cls_position=INF), ValueError, 'cls_position', 'inf', 'a finite number'),
    ('FourierFeatures', dict(fourier_dim=-2), ValueError, 'fourier_dim', '-2', 'an int >= 1 divisible by 2, or None'),
    ('FourierFeatures', dict(fourier_dim=3), ValueError, 'fourier_dim', '3', 'divisible by 2'),
    ('FourierFeatures', dict(hidden_dim=0), ValueError, 'hidden_dim', '0', 'an int >= 1'),
    ('FourierFeatures', dict(gamma=0.0), ValueError, 'gamma', '0.0', 'a finite number > 0'),
    ('FourierFeatures', dict(normalize='no'), TypeError, 'normalize', "'no' (str)", 'True or False'),
    ('SinCos2D', dict(temperature=0.0), ValueError, 'temperature', '0.0', 'MAE and DiT use 10000'),
    ('SinCos2D', dict(temperature=-INF), ValueError, 'temperature', '-inf', 'a finite number > 0'),
    ('SinCos2D', dict(embed_dim=30), ValueError, 'embed_dim', '30', 'divisible by 4'),
    ('DETRSine', dict(temperature=NAN), ValueError, 'temperature', 'nan', 'a finite number > 0'),
    ('DETRSine', dict(scale=0.0), ValueError, 'scale', '0.0', 'a finite number > 0'),
    ('DETRSine', dict(normalize=None), TypeError, 'normalize', 'None (NoneType)', 'True or False'),
    ('DETRSine', dict(embed_dim=7), ValueError, 'embed_dim', '7', 'divisible by 2'),
    ('LearnedAPE', dict(grid_size=(4,)), ValueError, 'grid_size', '(4,) (length 1)', 'a sequence of 2 items'),
    ('LearnedAPE', dict(grid_size=(4, 0)), ValueError, 'grid_size', '(4, 0) (item 1 is 0)', 'an int >= 1'),
    ('LearnedAPE', dict(grid_size=(4.0, 4)), TypeError, 'grid_size', '(4.0, 4) (tuple) (item 0 is 4.0)', 'an int'),
    ('LearnedAPE', dict(interpolation='bicubik'), ValueError, 'interpolation', "'bicubik'", "Did you mean 'bicubic'"),
    ('LearnedAPE', dict(antialias='True'), TypeError, 'antialias', "'True' (str)", 'True or False'),
    ('LearnedAPE', dict(no_embed_class=0), TypeError, 'no_embed_class', '0 (int)', 'True or False'),
    ('iRPE', dict(method='prodcut'), ValueError, 'method', "'prodcut'", "Did you mean 'product'"),
    ('iRPE', dict(mode='context'), ValueError, 'mode', "'context'", "Did you mean 'contextual'"),
    ('iRPE', dict(ratio=0.0), ValueError, 'ratio', '0.0', 'a finite number > 0'),
    ('iRPE', dict(ratio=NAN), ValueError, 'ratio', 'nan', 'a finite number > 0'),
    ('iRPE', dict(shared_head=2), TypeError, 'shared_head', '2 (int)', 'True or False'),
    ('iRPE', dict(on=5), TypeError, 'on', '5 (int)', 'a string'),
    ('PEG', dict(after_blocks=(-1,)), ValueError, 'after_blocks', '(-1,) (item 0 is -1)', 'an int >= 0'),
    ('PEG', dict(after_blocks=0), TypeError, 'after_blocks', '0 (int)', 'a sequence of items'),
    ('PEG', dict(kernel_size=0), ValueError, 'kernel_size', '0', 'an int >= 1'),
    ('ALiBi2D', dict(distance_scale=-1.0), ValueError, 'distance_scale', '-1.0', 'a finite number >= 0'),
    ('ALiBi2D', dict(distance_scale=NAN), ValueError, 'distance_scale', 'nan', 'a finite number >= 0'),
    ('ALiBi2D', dict(num_heads=0), ValueError, 'num_heads', '0', 'an int >= 1'),
    ('RPE2D', dict(base='RoPEAxial', max_grid=0), ValueError, 'max_grid', '0', 'an int >= 1'),
    ('RPE2D', dict(base='RoPEAxial', max_grid=(8, 8, 8)), ValueError, 'max_grid', '(8, 8, 8) (length 3)',
     'a sequence of 2 items'),
    ('RPE2D', dict(base='RoPEAxial', max_grid=8, seed='1'), TypeError, 'seed', "'1' (str)", 'an int, or None'),
]


@pytest.mark.parametrize('type_name, options, error, name, value, fix', BAD_BUILDS,
                         ids=[f'{case[0]}-{case[1]}' for case in BAD_BUILDS])
def test_bad_options_are_refused_at_build(type_name, options, error, name, value, fix) -> None:
    with pytest.raises(error) as info:
        build(type_name, **options)
    assert_names_option_value_and_fix(str(info.value), name, value, fix)
    assert str(info.value).startswith(f'{type_name} option {name}')


def test_direct_construction_and_configs_are_checked_the_same_way() -> None:
    with pytest.raises(ValueError, match=r'RoPEAxial option theta must be a finite number > 0; got -1\. The RoPE '
                                         r'base is positive \(rope-vit uses 100'):
        RoPEAxial(head_dim=64, theta=-1)
    with pytest.raises(ValueError, match='ComRoPE option block_size must be an int >= 1; got 0'):
        ComRoPE(64, 2, 4, 'AP', 0)
    with pytest.raises(ValueError, match='LookHere option layer_slopes'):
        vispe.create_vit('vit_tiny_patch16_224', img_size=16, patch_size=8, depth=1, num_classes=2,
                         encoding=dict(type='LookHere', layer_slopes=[1.0]))


def test_unknown_constructor_option_names_the_closest() -> None:
    with pytest.raises(TypeError, match=r"RoPEAxial has no option 'thetta'\. Did you mean 'theta'\? It accepts: "
                                        r'head_dim, theta, position_scale\.'):
        build('RoPEAxial', thetta=100.0)
    with pytest.raises(TypeError, match="NoPE has no option 'theta'. It takes no options."):
        build('NoPE', theta=1.0)


def test_valid_values_are_normalised() -> None:
    rope = build('RoPEAxial', theta=250, position_scale=np.float32(0.5))
    assert type(rope.theta) is float and rope.theta == 250.0 and type(rope.position_scale) is float
    lookhere = build('LookHere', layer_slopes=[2, 1])
    assert lookhere.layer_slopes == (2.0, 1.0) and all(type(s) is float for s in lookhere.layer_slopes)
    assert build('LearnedAPE', grid_size=np.int64(4)).grid_size == (4, 4)
    assert build('FourierFeatures', fourier_dim=None).fourier_dim == CONTEXT['embed_dim']


@pytest.mark.parametrize('name, options', EXAMPLES, ids=[f'{n}-{o}' for n, o in EXAMPLES])
def test_every_example_builds(name, options) -> None:
    assert isinstance(build(name, **options), REGISTERED[name])


def test_every_built_in_encoding_declares_its_options() -> None:
    for name in BUILT_IN:
        cls = REGISTERED[name]
        assert cls.declares_options, name
        taken = {p for p in inspect.signature(cls.__init__).parameters if p != 'self'}
        assert taken - {'context'} == set(cls.options), name
        assert all(option.doc.endswith('.') for option in cls.options.values()), name


def test_declared_test_time_options() -> None:
    declared = {name: sorted(cls.test_time_options()) for name, cls in REGISTERED.items() if name in BUILT_IN}
    assert declared == {
        'ALiBi2D': ['distance_scale', 'kernel'], 'ComRoPE': [], 'DETRSine': [], 'FourierFeatures': [],
        'LearnedAPE': ['antialias', 'interpolation'], 'LookHere': ['global_slope', 'kernel', 'reference_rounding'],
        'MultiViewSine': [], 'NoPE': [], 'PEG': [], 'PETR': [], 'PPE3D': [], 'RPE2D': ['eval_positions'], 'RoPEAxial': ['position_scale', 'theta'],
        'RoPEMixed': ['position_scale'], 'SinCos2D': ['resize'], 'iRPE': ['kernel']}


@pytest.mark.parametrize('name, options', EXAMPLES, ids=[f'{n}-{o}' for n, o in EXAMPLES])
def test_every_encoding_refuses_misspelt_and_build_time_attributes(name, options) -> None:
    """A built encoding takes new attributes (a hook may keep state on self), except a near miss of an option's name
    (a misspelt option would pass silently) and a declared option fixed at build."""
    encoding = build(name, **options)
    encoding.last_seen_grid = (3, 4)
    assert encoding.last_seen_grid == (3, 4)
    for option in type(encoding).options:
        misspelt = option[:-1] + ('x' if option[-1] != 'x' else 'y')
        with pytest.raises(AttributeError, match=f"{name} has no option '{misspelt}'. Did you mean {option}"):
            setattr(encoding, misspelt, 1)
        assert misspelt not in vars(encoding)
    for option, declaration in type(encoding).options.items():
        if declaration.test_time:
            setattr(encoding, option, getattr(encoding, option))
            continue
        with pytest.raises(AttributeError) as info:
            setattr(encoding, option, getattr(encoding, option, None))
        message = str(info.value)
        assert f'{name} option {option} cannot change after build' in message and 'Rebuild the encoding' in message


@pytest.mark.parametrize('type_name, attribute, value, error, fix', [
    ('RoPEAxial', 'theta', -1.0, ValueError, 'a finite number > 0; got -1.0.'),
    ('RoPEAxial', 'theta', NAN, ValueError, 'a finite number > 0; got nan.'),
    ('RoPEAxial', 'theta', '100', TypeError, "a finite number > 0; got '100' (str)."),
    ('RoPEAxial', 'position_scale', 0.0, ValueError, 'a finite number > 0; got 0.0.'),
    ('RoPEMixed', 'position_scale', INF, ValueError, 'a finite number > 0; got inf.'),
    ('LookHere', 'global_slope', -0.1, ValueError, 'a finite number >= 0; got -0.1.'),
    ('LookHere', 'reference_rounding', 1, TypeError, 'True or False; got 1 (int).'),
    ('ALiBi2D', 'distance_scale', -2, ValueError, 'a finite number >= 0; got -2.'),
    ('LearnedAPE', 'interpolation', 'bicubik', ValueError, "got 'bicubik'. Did you mean 'bicubic'?"),
])
def test_bad_test_time_values_are_refused_and_not_set(type_name, attribute, value, error, fix) -> None:
    built = build(type_name)
    before = getattr(built, attribute)
    with pytest.raises(error) as info:
        setattr(built, attribute, value)
    assert f'option {attribute} must be' in str(info.value) and fix in str(info.value)
    assert getattr(built, attribute) == before


def test_misspelt_attributes_name_the_closest_test_time_option() -> None:
    lookhere = build('LookHere')
    with pytest.raises(AttributeError, match=r"LookHere has no option 'global_slop'\. Did you mean "
                                             r'global_slope\? .* Test-time options of LookHere: global_slope, '
                                             r'reference_rounding, kernel\.'):
        lookhere.global_slop = 0.9
    assert not hasattr(lookhere, 'global_slop')
    with pytest.raises(AttributeError, match=r'Did you mean layer_slopes \(fixed at build\)\? .* Test-time'):
        lookhere.layer_slops = (1.0, 1.0)
    stack = vispe.build_encoding(['LearnedAPE', 'RoPEAxial'], **CONTEXT)
    with pytest.raises(AttributeError, match=r'Did you mean encodings\.1\.theta\?'):
        stack.theta = 160.0
    rpe = build('RPE2D', base='RoPEAxial', max_grid=8)
    with pytest.raises(AttributeError, match=r'Did you mean base\.theta\?'):
        rpe.theta = 160.0
    rpe.base.theta = 160.0
    assert rpe.base.theta == 160.0


def test_check_test_time_option_checks_without_setting() -> None:
    rope = build('RoPEAxial')
    assert check_test_time_option(rope, 'theta', 160) == 160.0 and rope.theta == 100.0
    with pytest.raises(AttributeError, match="RoPEAxial has no option 'thta'. Did you mean theta"):
        check_test_time_option(rope, 'thta', 160)
    with pytest.raises(AttributeError, match='head_dim cannot change after build'):
        check_test_time_option(rope, 'head_dim', 16)
    with pytest.raises(TypeError, match="theta must be a finite number > 0; got 'abc'"):
        check_test_time_option(rope, 'theta', 'abc')


def attention_logits(encoding: RoPEAxial, grid: tuple[int, int] = (4, 4)) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 1 + grid[0] * grid[1], 8, generator=generator)
    k = torch.randn(1, 2, 1 + grid[0] * grid[1], 8, generator=generator)
    pos = Positions(grid, num_prefix_tokens=1)
    q, k = encoding.rotate(q, k, pos, pos, 0)
    return q @ k.transpose(-1, -2)


def test_valid_test_time_changes_change_the_output() -> None:
    rope = build('RoPEAxial')
    base = attention_logits(rope)
    rope.theta = 250
    changed = attention_logits(rope)
    assert not torch.allclose(changed, base)
    rope.theta = 100.0
    assert torch.equal(attention_logits(rope), base)

    mixed = build('RoPEMixed')
    table = mixed.rotations(Positions((4, 4), num_prefix_tokens=1))
    mixed.position_scale = 0.5
    half = mixed.rotations(Positions((4, 4), num_prefix_tokens=1))
    assert not torch.allclose(half, table) and torch.allclose(half * half, table, atol=1e-5)

    lookhere = build('LookHere', fill_with='zero')
    bias = lookhere.layer_bias(Positions((4, 4), num_prefix_tokens=1), 0)
    lookhere.global_slope = 0.5
    assert torch.allclose(lookhere.layer_bias(Positions((4, 4), num_prefix_tokens=1), 0), bias * 0.5)

    alibi = build('ALiBi2D')
    bias = alibi.bias(Positions((4, 4), num_prefix_tokens=1))
    alibi.distance_scale = 0.25
    assert torch.allclose(alibi.bias(Positions((4, 4), num_prefix_tokens=1)), bias * 0.25)


def test_reference_rounding_and_resampling_switch_after_build() -> None:
    options = dict(num_heads=4, depth=2, directions='halves', global_slope=0.9)
    switched = LookHere(**options)
    switched.layer_bias(Positions((5, 3), num_prefix_tokens=1), 1)
    switched.reference_rounding = True
    expected = LookHere(reference_rounding=True, **options).layer_bias(Positions((5, 3), num_prefix_tokens=1), 1)
    assert torch.equal(switched.layer_bias(Positions((5, 3), num_prefix_tokens=1), 1), expected)

    ape = build('LearnedAPE')
    bicubic = ape.resampled((6, 6))
    ape.interpolation = 'nearest'
    nearest = ape.resampled((6, 6))
    assert nearest.shape == bicubic.shape and not torch.allclose(nearest, bicubic)
    assert torch.equal(ape.resampled((4, 4)), ape.pos_embed)


def test_module_mechanics_keep_working() -> None:
    vit = vispe.create_vit('vit_tiny_patch16_224', img_size=16, patch_size=4, embed_dim=32, depth=2, num_heads=4,
                           num_classes=2, encoding=['LearnedAPE', dict(type='RoPEMixed')])
    images = torch.randn(1, 3, 16, 16)
    vit.train().eval()
    vit.to(torch.float64).to(torch.float32)
    mixed = vit.encoding.encodings[1]
    mixed.freqs = nn.Parameter(mixed.freqs.detach().clone())
    mixed._note = 'private names are plain attributes'
    mixed.build_cis = mixed.build_cis
    clone = copy.deepcopy(vit)
    vit.load_state_dict(clone.state_dict())
    vit.load_state_dict(clone.state_dict(), assign=True)
    buffer = io.BytesIO()
    torch.save(vit, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    with torch.no_grad():
        assert torch.equal(loaded(images), vit(images)) and torch.equal(clone(images), vit(images))
    for copied in (clone, loaded):
        with pytest.raises(AttributeError, match='Did you mean position_scale'):
            copied.encoding.encodings[1].position_scal = 0.5
        with pytest.raises(ValueError, match='position_scale must be'):
            copied.encoding.encodings[1].position_scale = -1.0


class Logits(nn.Module):
    """Attention logits of fixed q and k under an encoding (a module for torch.compile)."""

    def __init__(self, encoding: PositionEncoding) -> None:
        super().__init__()
        self.encoding = encoding

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        pos = Positions((4, 4), num_prefix_tokens=1)
        q, k = self.encoding.rotate(q, k, pos, pos, 0)
        return q @ k.transpose(-1, -2)


@pytest.mark.slow
def test_torch_compile_follows_test_time_changes() -> None:
    module = Logits(build('RoPEAxial'))
    q, k = torch.randn(2, 1, 2, 17, 8).unbind(0)
    compiled = torch.compile(module, backend='eager')
    # traced, the rotations run in their real (cos, sin) form: equal to float32 rounding
    assert torch.allclose(compiled(q, k), module(q, k), atol=1e-6)
    module.encoding.theta = 250.0
    assert torch.allclose(compiled(q, k), module(q, k), atol=1e-6)
    assert not torch.allclose(compiled(q, k), Logits(build('RoPEAxial'))(q, k), atol=1e-3)


def test_plugin_without_declarations_keeps_plain_attributes() -> None:
    class ScaledPE(PositionEncoding):
        def __init__(self, embed_dim: int, scale: float = 1.0) -> None:
            super().__init__()
            self.proj = nn.Linear(2, embed_dim)
            self.scale = scale

        def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
            self.last_grid = pos.grid_size
            return torch.cat([x[:, :1], x[:, 1:] + self.proj(pos.patch_coords() * self.scale)], dim=1)

    encoding = ScaledPE(embed_dim=8, scale='not checked')
    encoding.scale = 0.5
    assert encoding.embed(torch.zeros(1, 5, 8), Positions((2, 2), num_prefix_tokens=1)).shape == (1, 5, 8)
    assert encoding.last_grid == (2, 2) and not ScaledPE.declares_options and ScaledPE.test_time_options() == {}


def test_plugin_declarations_are_checked_everywhere() -> None:
    class ScaledPE(PositionEncoding):
        options = {'embed_dim': vispe.encodings.options.MODEL_FACTS['embed_dim'],
                   'scale': Option(float, gt=0, test_time=True, doc='Positive; only scales positions.')}

        def __init__(self, embed_dim: int, scale: float = 1.0) -> None:
            super().__init__()
            self.scale = scale

    with pytest.raises(ValueError, match=r'ScaledPE option scale must be a finite number > 0; got -1\. Positive'):
        ScaledPE(embed_dim=8, scale=-1)
    encoding = ScaledPE(embed_dim=8)
    encoding.scale = 2
    assert encoding.scale == 2.0
    with pytest.raises(AttributeError, match=r'Did you mean embed_dim \(fixed at build\)\?'):
        encoding.embed_di = 3

    class StricterRoPE(RoPEAxial):
        def __init__(self, head_dim: int, theta: float = 100.0) -> None:
            super().__init__(head_dim, theta)

    with pytest.raises(ValueError, match='StricterRoPE option theta must be'):
        StricterRoPE(head_dim=8, theta=-1.0)
    with pytest.raises(TypeError, match=r"declares options \['sclae'\] that its __init__ does not take"):
        class Misdeclared(PositionEncoding):
            options = {'sclae': Option(float)}

            def __init__(self, scale: float = 1.0) -> None:
                super().__init__()


def test_option_api() -> None:
    option = Option(float, ge=0, le=1, doc='A fraction.')
    assert option.check('X', 'p', 1) == 1.0 and option.requirement() == 'a finite number >= 0 and <= 1'
    with pytest.raises(ValueError, match=r'X option p must be a finite number >= 0 and <= 1; got 1\.5\. A fraction\.'):
        option.check('X', 'p', 1.5)
    with pytest.raises(TypeError, match='got False'):
        option.check('X', 'p', False)
    assert Option(float, finite=False).check('X', 'p', INF) == INF and math.isnan(Option(float, finite=False).check(
        'X', 'p', NAN))
    assert Option(int, ge=1, sequence=True, length=2, scalar_ok=True).check('X', 'g', 3) == (3, 3)
    assert Option(int, optional=True).check('X', 'seed', None) is None
    assert Option(str, choices=('a', 'b')).requirement() == "one of 'a', 'b'"
    with pytest.raises(TypeError, match='choices are for kind=str'):
        Option(float, choices=('a',))
    with pytest.raises(TypeError, match='length and scalar_ok are for sequence=True'):
        Option(int, length=2)
    with pytest.raises(TypeError, match='Option kind must be one of'):
        Option(list)
    with pytest.raises(AttributeError):
        option.gt = 1.0


def test_encodings_table_marks_test_time_options() -> None:
    rows = {info.name: info.options for info in vispe.list_encodings()}
    assert rows['RoPEAxial'] == ('theta=100.0 (test-time)', 'position_scale=1.0 (test-time)')
    assert 'layer_slopes=(1.5, 0.5)' in rows['LookHere'] and 'global_slope=1.0 (test-time)' in rows['LookHere']


def runs(*encodings: PositionEncoding) -> list[tuple[str, nn.Module]]:
    return [(type(encoding).__name__, encoding) for encoding in encodings]


def test_eval_resolution_validates_every_option_before_evaluating() -> None:
    tool = load_tool('eval_resolution')
    loaded = runs(build('RoPEAxial'), build('RoPEMixed'), build('LookHere'))

    def check(*items: str) -> None:
        tool.check_encoding_options(loaded, tool.parse_encoding_options(list(items), [28, 56]))

    check('all:theta=160', '56:global_slope=0.95', '56:position_scale=0.5')
    with pytest.raises(ValueError, match=r"has a test-time option 'global_slop'\. Did you mean 'global_slope'\? "
                                         r'Test-time options of these runs: theta, position_scale, global_slope'):
        check('56:global_slop=0.9')
    with pytest.raises(ValueError, match=r'--encoding-options 28:layer_slopes=\(1, 1\): no encoding of these runs '
                                         r'\(LookHere, RoPEAxial, RoPEMixed\) may change layer_slopes at test time'):
        check('all:layer_slopes=(1,1)')
    with pytest.raises(TypeError, match=r"--encoding-options 28:theta='abc': RoPEAxial option theta must be a "
                                        r"finite number > 0; got 'abc' \(str\)"):
        check('all:theta=abc')
    with pytest.raises(ValueError, match=r'56:global_slope=-1: LookHere option global_slope must be a finite number '
                                         r'>= 0; got -1'):
        check('56:global_slope=-1')
    with pytest.raises(ValueError, match=r'RoPEMixed option theta cannot change after build'):
        tool.check_encoding_options(runs(build('RoPEMixed')), tool.parse_encoding_options(['all:theta=160'], [28]))
    with pytest.raises(ValueError, match="the size before \":\" is one of --sizes \\[28, 56\\] or all; got 'big'"):
        check('big:theta=160')
    with pytest.raises(ValueError, match="'' is not an option name"):
        check('all:=160')


def test_eval_resolution_sets_only_declared_test_time_options() -> None:
    stack = vispe.build_encoding(['LearnedAPE', 'RoPEAxial', dict(type='RoPEMixed')], **CONTEXT)
    assert option_owners(stack, 'theta') == [stack.encodings[1]]
    assert option_owners(stack, 'position_scale') == [stack.encodings[1], stack.encodings[2]]
    previous = set_encoding_options(stack, {'theta': 160, 'position_scale': 0.5})
    assert stack.encodings[1].theta == 160.0 and stack.encodings[2].position_scale == 0.5
    assert stack.encodings[2].init_theta == 10.0
    for (owner, name), value in previous.items():
        setattr(owner, name, value)
    assert stack.encodings[1].theta == 100.0 and stack.encodings[2].position_scale == 1.0


def test_eval_resolution_names_encodings_without_declarations() -> None:
    class Undeclared(PositionEncoding):
        def __init__(self, scale: float = 1.0) -> None:
            super().__init__()
            self.scale = scale

    tool = load_tool('eval_resolution')
    with pytest.raises(ValueError, match=r"has a test-time option 'scale'\. Test-time options of these runs: none\. "
                                         r'Undeclared declare no options'):
        tool.check_encoding_options(runs(Undeclared()), tool.parse_encoding_options(['all:scale=2'], [28]))


@pytest.mark.parametrize('config, attribute', [
    (dict(type='RoPEAxial', theta=1e-300), None), (dict(type='ComRoPE', init_std=1e300), None),
    (dict(type='DETRSine', temperature=1e-300), None), (dict(type='RoPEAxial'), ('position_scale', 1e300)),
    (dict(type='LookHere'), ('global_slope', 1e300)), (dict(type='ALiBi2D'), ('distance_scale', 1e300)),
], ids=lambda value: str(value))
def test_values_that_overflow_float32_are_refused(config, attribute) -> None:
    """Before, each of these built (or was set) and gave NaN logits."""
    context = dict(embed_dim=64, num_heads=4, head_dim=16, depth=2, grid_size=(7, 7), num_prefix_tokens=1)
    with pytest.raises(ValueError, match=r'Encodings compute in float32.*magnitude from 1e-30 to 1e\+30'):
        encoding = vispe.build_encoding(config, **context)
        name, value = attribute
        setattr(encoding, name, value)


def test_a_type_that_is_not_a_name_or_an_encoding_class_is_named() -> None:
    for bad in (None, 5):
        with pytest.raises(TypeError, match=rf'"type" is a registered name such as "RoPEAxial" .*got {bad!r}'):
            vispe.build_encoding(dict(type=bad), head_dim=16)
    with pytest.raises(TypeError, match='int is not a vispe PositionEncoding: an encoding class subclasses'):
        vispe.build_encoding(dict(type=int))
