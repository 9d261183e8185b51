"""The comrope converter: Longin-Yu/ComRoPE's transformers models (golden files made with their code, see
tests/data/released/comrope/README.md) give the authors' logits in vispe, at the training size and a larger one."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import vispe
from vispe.checkpoint import read_state_dict
from vispe.converters import CheckpointFamilyError, UnsupportedCheckpointError, convert_state_dict

from .parity import RELEASED, assert_golden, assert_refused, convert_with_the_command, truncated_copy

DATA = RELEASED / 'comrope'
# variant -> (file suffix, block size, two-layer head)
VARIANTS = {'AP': ('', 2, False), 'LD': ('_ld', 4, True)}
TOLERANCE = 1e-5


def golden_file(variant: str) -> Path:
    return DATA / f'golden{VARIANTS[variant][0]}.pt'


@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_the_command_gives_the_authors_logits(variant: str, tmp_path: Path) -> None:
    source = DATA / f'state_dict{VARIANTS[variant][0]}.pt'
    model, meta = convert_with_the_command('comrope', source, tmp_path / 'converted.pth')
    assert meta['encodings'] == ['ComRoPE']
    assert_golden(model, golden_file(variant), tolerance=TOLERANCE)


@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_the_library_gives_the_authors_logits(variant: str, tmp_path: Path) -> None:
    state_dict = read_state_dict(DATA / f'state_dict{VARIANTS[variant][0]}.pt')
    conversion = convert_state_dict('comrope', state_dict, 'golden.pt')
    assert conversion.model['encoding'] == dict(type='ComRoPE', variant=variant, block_size=VARIANTS[variant][1])
    assert ('head_hidden_dim' in conversion.model) == VARIANTS[variant][2]
    model = vispe.MODELS.build(conversion.model)
    model.load_state_dict(conversion.state_dict, strict=True)
    assert_golden(model, golden_file(variant), tolerance=TOLERANCE)
    # a safetensors file (transformers' save_pretrained) converts the same
    from safetensors.torch import save_file
    save_file({key: value.contiguous() for key, value in state_dict.items()}, tmp_path / 'model.safetensors')
    again = convert_state_dict('comrope', read_state_dict(tmp_path / 'model.safetensors'))
    assert all(torch.equal(again.state_dict[key], value) for key, value in conversion.state_dict.items())


def drop_layer(state_dict: dict[str, torch.Tensor], index: int) -> dict[str, torch.Tensor]:
    return {key: value for key, value in state_dict.items() if f'.layers.{index}.' not in key}


def test_another_depth_gives_its_model_and_a_gap_is_refused() -> None:
    state_dict = read_state_dict(DATA / 'state_dict_ld.pt')
    conversion = convert_state_dict('comrope', drop_layer(state_dict, 1))
    assert conversion.model['depth'] == 1 and tuple(conversion.state_dict['encoding.freqs'].shape) == (1, 4, 4, 4, 4)
    model = vispe.MODELS.build(conversion.model)
    model.load_state_dict(conversion.state_dict, strict=True)
    with pytest.raises(CheckpointFamilyError, match=r'the encoder layers are \[1\]'):
        convert_state_dict('comrope', drop_layer(state_dict, 0))


def test_variants_vispe_does_not_compute_are_refused() -> None:
    state_dict = read_state_dict(DATA / 'state_dict.pt')
    with_ape = dict(state_dict, **{'vision_model.embeddings.position_embedding': torch.zeros(1, 4, 4, 64)})
    with pytest.raises(UnsupportedCheckpointError, match='keep_ape=False.*depends on the row only'):
        convert_state_dict('comrope', with_ape, 'ape.bin')
    liere = {key: torch.zeros(4, 2, 8, 2, 2) if key.endswith('self_attn.freqs') else value
             for key, value in state_dict.items()}
    with pytest.raises(UnsupportedCheckpointError, match='LieRE'):
        convert_state_dict('comrope', liere, 'liere.bin')
    vanilla = {key: value for key, value in state_dict.items() if not key.endswith('self_attn.freqs')}
    with pytest.raises(CheckpointFamilyError, match='has no ComRoPE generators'):
        convert_state_dict('comrope', vanilla, 'rope.bin')


def test_another_family_is_refused(tmp_path: Path, capsys) -> None:
    assert_refused('comrope', RELEASED / 'lookhere' / 'state_dict.pt', tmp_path / 'out.pth', capsys,
                   "is not a 'comrope' checkpoint", "Its keys resemble 'lookhere'")
    timm_vit = {'cls_token': torch.zeros(1, 1, 8), 'pos_embed': torch.zeros(1, 5, 8), 'head.weight': torch.zeros(3, 8)}
    with pytest.raises(CheckpointFamilyError, match="is not a 'comrope' checkpoint"):
        convert_state_dict('comrope', timm_vit, 'vit.pth')


def test_a_truncated_file_is_refused_naming_it(tmp_path: Path, capsys) -> None:
    source = truncated_copy(DATA / 'state_dict.pt', tmp_path, 'pytorch_model.bin')
    assert_refused('comrope', source, tmp_path / 'out.pth', capsys, 'corrupt')


def test_file_entries_the_family_does_not_read_are_refused() -> None:
    with pytest.raises(TypeError, match=r"The 'comrope' converter has no option config; it takes no options\."):
        convert_state_dict('comrope', read_state_dict(DATA / 'state_dict.pt'), config={})
