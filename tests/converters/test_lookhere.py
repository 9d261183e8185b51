"""The lookhere converter: GreenCUBIC/lookhere's models (golden files made with their code, see
tests/data/released/lookhere/README.md) give the authors' logits in vispe, at the training size and a larger one."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import vispe
from vispe.checkpoint import read_checkpoint, read_checkpoint_entries
from vispe.converters import CheckpointFamilyError, UnsupportedCheckpointError, convert_state_dict

from ..helpers import load_tool, max_diff
from .parity import RELEASED, assert_golden, assert_refused, convert_with_the_command, truncated_copy

DATA = RELEASED / 'lookhere'
# variant -> (file suffix, directions in its config)
VARIANTS = {'lh180': ('', 'halves'), 'lh45': ('_lh45', 'triangles-eighths1-eighths2')}
TOLERANCE = 1e-5


def released(variant: str) -> tuple[dict[str, torch.Tensor], dict]:
    """(weights, config) of a golden file, read as the converter reads released files."""
    state_dict, entries = read_checkpoint_entries(DATA / f'state_dict{VARIANTS[variant][0]}.pt', ['config'])
    return state_dict, entries['config']


def golden_file(variant: str) -> Path:
    return DATA / f'golden{VARIANTS[variant][0]}.pt'


@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_the_command_gives_the_authors_logits(variant: str, tmp_path: Path, capsys) -> None:
    source = DATA / f'state_dict{VARIANTS[variant][0]}.pt'
    model, meta = convert_with_the_command('lookhere', source, tmp_path / 'converted.pth')
    assert f"directions='{VARIANTS[variant][1]}'" in capsys.readouterr().out and meta['encodings'] == ['LookHere']
    assert_golden(model, golden_file(variant), tolerance=TOLERANCE)


@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_the_library_gives_the_authors_logits(variant: str) -> None:
    state_dict, config = released(variant)
    conversion = convert_state_dict('lookhere', state_dict, 'golden.pt', config=config)
    encoding = conversion.model['encoding']
    assert encoding['directions'] == config['head_directions'] and encoding['reference_rounding']
    assert encoding['global_slope'] == config['global_slope'] and encoding['layer_slopes'] == config['layer_slopes']
    model = vispe.MODELS.build(conversion.model)
    model.load_state_dict(conversion.state_dict, strict=True)
    assert_golden(model, golden_file(variant), tolerance=TOLERANCE)
    # the reference's bfloat16 rounding matters at this tolerance: full-precision biases give other logits
    model.encoding.reference_rounding = False
    golden = torch.load(golden_file(variant), weights_only=True)
    with torch.no_grad():
        assert max_diff(model.eval()(golden['inputs_48']), golden['logits_48']) > TOLERANCE


def vit_state_dict(depth: int, width: int, classes: int = 5) -> dict[str, torch.Tensor]:
    """A LookHere-layout state dict of random tensors of another depth and width (patch 16)."""
    torch.manual_seed(0)
    state = {'cls_token': torch.randn(1, 1, width), 'patch_embed.proj.weight': torch.randn(width, 3, 16, 16),
             'patch_embed.proj.bias': torch.randn(width), 'norm.weight': torch.randn(width),
             'norm.bias': torch.randn(width), 'head.fc1.weight': torch.randn(2 * width, width),
             'head.fc1.bias': torch.randn(2 * width), 'head.fc2.weight': torch.randn(classes, 2 * width),
             'head.fc2.bias': torch.randn(classes)}
    for block in range(depth):
        for name, shape in (('norm1', (width,)), ('norm2', (width,)), ('attn.qkv', (3 * width, width)),
                            ('attn.proj', (width, width)), ('mlp.fc1', (3 * width, width)),
                            ('mlp.fc2', (width, 3 * width))):
            state[f'blocks.{block}.{name}.weight'] = torch.randn(shape)
            state[f'blocks.{block}.{name}.bias'] = torch.randn(shape[0])
        state[f'blocks.{block}.ls1.gamma'] = torch.randn(width)
        state[f'blocks.{block}.ls2.gamma'] = torch.randn(width)
    return state


def test_another_depth_and_width_give_their_model(tmp_path: Path) -> None:
    """Without num_heads in the config the heads follow the ViT convention of 64 channels each."""
    source, output = tmp_path / 'lh.pth', tmp_path / 'out.pth'
    config = dict(head_directions=['corners'], global_slope=0.5, layer_slopes=(1.0, 1.0), distance='sqrt',
                  epochs=150)
    torch.save(dict(weights=vit_state_dict(depth=1, width=256), config=config), source)
    assert load_tool('convert_checkpoint').main(['lookhere', str(source), str(output)]) == 0
    model_config = read_checkpoint(output)[1]['model']
    assert (model_config['embed_dim'], model_config['depth'], model_config['num_heads']) == (256, 1, 4)
    assert (model_config['mlp_ratio'], model_config['head_hidden_dim'], model_config['num_classes']) == (3.0, 512, 5)
    assert model_config['encoding']['distance'] == 'sqrt' and model_config['encoding']['directions'] == 'corners'
    model = vispe.MODELS.build(model_config).eval()
    model.load_state_dict(read_checkpoint(output)[0], strict=True)
    assert model(torch.randn(1, 3, 48, 64)).shape == (1, 5)


@pytest.mark.parametrize('config, message', [
    (None, "has no 'config' entry beside its weights.*torch.save\\(\\{'weights'"),
    (dict(head_directions='halves'), r"lacks \['global_slope', 'layer_slopes'\]"),
    (dict(head_directions=['halves', 'corners'], global_slope=1.0, layer_slopes=[1.5, 0.5]),
     'differs across layers'),
    (dict(head_directions='quarters', global_slope=1.0, layer_slopes=[1.5, 0.5]), "Unknown LookHere directions"),
    (dict(head_directions='halves-zero-center', global_slope=1.0, layer_slopes=[1.5, 0.5], num_heads=8),
     'with 8 heads: LookHere spreads 3 shorthands over 8 heads'),
])
def test_a_config_vispe_cannot_follow_is_refused(config, message: str) -> None:
    state_dict = vit_state_dict(depth=2, width=128)
    with pytest.raises(UnsupportedCheckpointError, match=message):
        convert_state_dict('lookhere', state_dict, 'lh.pth', **({} if config is None else {'config': config}))


def test_a_file_without_its_config_is_refused_by_the_command(tmp_path: Path, capsys) -> None:
    source, output = tmp_path / 'weights_only.pth', tmp_path / 'out.pth'
    torch.save(dict(weights=vit_state_dict(depth=1, width=64)), source)
    assert_refused('lookhere', source, output, capsys, "has no 'config' entry")


def test_another_family_is_refused(tmp_path: Path, capsys) -> None:
    timm_vit = {'cls_token': torch.zeros(1, 1, 8), 'pos_embed': torch.zeros(1, 5, 8),
                'patch_embed.proj.weight': torch.zeros(8, 3, 4, 4), 'blocks.0.ls1.gamma': torch.zeros(8),
                'head.weight': torch.zeros(3, 8)}
    with pytest.raises(CheckpointFamilyError, match="is not a 'lookhere' checkpoint"):
        convert_state_dict('lookhere', timm_vit, 'deit3.pth')
    with pytest.raises(CheckpointFamilyError, match='has a pos_embed'):
        convert_state_dict('lookhere', dict(timm_vit, **{'head.fc1.weight': torch.zeros(2, 8),
                                                         'head.fc2.weight': torch.zeros(3, 2)}), 'x.pth')
    assert_refused('lookhere', RELEASED / 'comrope' / 'state_dict.pt', tmp_path / 'out.pth', capsys,
                   "is not a 'lookhere' checkpoint", "Its keys resemble 'comrope'")


def test_a_truncated_file_is_refused_naming_it(tmp_path: Path, capsys) -> None:
    source = truncated_copy(DATA / 'state_dict.pt', tmp_path, 'LH_180_weights_and_config.pth')
    assert_refused('lookhere', source, tmp_path / 'out.pth', capsys, 'corrupt')


@pytest.mark.parametrize('variant, directions', [('180', 'halves'), ('90', 'corners'),
                                                 ('45', 'triangles-eighths1-eighths2')])
def test_the_released_configs_are_the_models_the_converter_infers(variant: str, directions: str) -> None:
    """configs/released/lookhere_vit-b16-*_in1k.py hold the converter's model for a ViT-B/16 LookHere file whose
    config has these directions, global slope 1 and layer slopes (1.5, 0.5) (shapes only: no ViT-B is built)."""
    from vispe.engine import load_config
    width, depth = 768, 12
    shapes = {'cls_token': (1, 1, width), 'patch_embed.proj.weight': (width, 3, 16, 16), 'norm.weight': (width,),
              'head.fc1.weight': (4 * width, width), 'head.fc2.weight': (1000, 4 * width),
              **{f'blocks.{block}.{name}': shape for block in range(depth) for name, shape in
                 (('ls1.gamma', (width,)), ('mlp.fc1.weight', (4 * width, width)))}}
    state_dict = {key: torch.empty(shape, device='meta') for key, shape in shapes.items()}
    config = dict(head_directions=directions, global_slope=1.0, layer_slopes=[1.5, 0.5])
    inferred = convert_state_dict('lookhere', state_dict, 'LH.pth', config=config).model
    path = Path(__file__).parents[2] / 'configs' / 'released' / f'lookhere_vit-b16-{variant}_in1k.py'
    assert load_config(path).model.backbone.to_dict() == inferred
