"""rope-vit: the DeiT-III ViTs with 2D RoPE of Heo et al., "Rotary Position Embedding for Vision Transformer"
(ECCV 2024), github.com/naver-ai/rope-vit (``models/vit_rope.py``, ``rope_vit_models``), as a registered family.

The released files (``rope_{axial,mixed}[_ape]_deit_{small,base,large}_patch16_LS``, on the Hugging Face hub
``naver-ai/<name>`` as ``pytorch_model.bin`` and on Google Drive) hold ``{'model': state_dict}``, as the DeiT
training script saves. They become a vispe ``TimmViT`` (timm's ``vit_*_patch16_224`` architecture) with
LayerScale (``init_values``), a class token, ``global_pool='token'`` and the authors' encoding:

* RoPE-Axial (no ``freqs`` tensor): ``RoPEAxial(theta=100)``. Their axial table is a plain attribute, so the file
  carries no frequencies: θ = 100 is the value every ``rope_axial_*`` model function of theirs passes.
* RoPE-Mixed: ``RoPEMixed``; their learned ``freqs`` (2, depth, heads·d/2) is (x/y, layer, head-major then pair),
  vispe's ``freqs`` (2, depth, heads, d/2) is the same numbers viewed per head. ``theta=10`` (their init) is kept for
  the record; the learned frequencies replace it.
* ``_ape`` variants (``pos_embed``, (1, N, C), added to the patches only, resized bicubically without antialiasing
  at other sizes): ``LearnedAPE(no_embed_class=True, antialias=False)`` before the RoPE.

Both compute as theirs: integer (column, row) patch positions from 0, channel pairs (2k, 2k+1), the class token not
rotated (vispe's prefix tokens get the identity rotation), plain extrapolation at other sizes.

Keys: ``blocks.i.gamma_1`` / ``gamma_2`` become timm's ``blocks.i.ls1.gamma`` / ``ls2.gamma``; every other weight
keeps its name. ``freqs_t_x`` / ``freqs_t_y`` (the mixed models' training-grid positions, a buffer their own loader
deletes) are derived: vispe computes positions from each input's grid. Nothing is unmapped; a key outside this
layout is refused.

What the tensors cannot say: the head count (no tensor's shape depends on it). Every released rope-vit DeiT has
64-wide heads (ViT-S 384/6, ViT-B 768/12, ViT-L 1024/16), so heads = width / 64; a width that is not a multiple of 64
is refused unless :func:`convert_rope_vit_state_dict` is given ``num_heads``. A file with ``pos_embed`` and no
``freqs`` is read as RoPE-Axial + APE: rope-vit's APE-only baseline (``deit_*_patch16_LS``) has the same keys and
must not be converted with this family.
"""
from __future__ import annotations

import re
from typing import Any

import torch

from vispe.converters.deit import VIT_NAMES, heads_of_width
from vispe.converters.registry import (CheckpointConverter, CheckpointFamilyError, Conversion, StateDict,
                                       UnsupportedCheckpointError, register_converter)

AXIAL_THETA = 100.0  # rope_axial_* in models/vit_rope.py
MIXED_THETA = 10.0  # rope_mixed_* (the init of the learned frequencies)
DERIVED = ('freqs_t_x', 'freqs_t_y')
BLOCK_KEY = re.compile(r'^blocks\.(\d+)\.(norm1\.(weight|bias)|attn\.qkv\.(weight|bias)|attn\.proj\.(weight|bias)|'
                       r'norm2\.(weight|bias)|mlp\.fc[12]\.(weight|bias)|gamma_[12])$')
TOP_KEYS = {'cls_token', 'pos_embed', 'freqs', 'patch_embed.proj.weight', 'patch_embed.proj.bias', 'norm.weight',
            'norm.bias', 'head.weight', 'head.bias', *DERIVED}
REQUIRED = ('cls_token', 'patch_embed.proj.weight', 'blocks.0.attn.qkv.weight', 'blocks.0.mlp.fc1.weight',
            'blocks.0.gamma_1', 'norm.weight')


def _refuse_foreign_keys(state_dict: StateDict, source: str) -> None:
    """A key outside rope-vit's layout (or a required one missing) means another family: refuse, naming them."""
    foreign = [key for key in state_dict if key not in TOP_KEYS and not BLOCK_KEY.match(key)]
    missing = [key for key in REQUIRED if key not in state_dict]
    if foreign or missing:
        listed = ', '.join(foreign[:6]) + (f' ... ({len(foreign)} in all)' if len(foreign) > 6 else '')
        raise CheckpointFamilyError(
            f'{source} is not a rope-vit DeiT checkpoint (naver-ai/rope-vit, models/vit_rope.py): '
            + (f'its keys {listed} are not in that layout' if foreign else '')
            + ('; ' if foreign and missing else '') + (f'it lacks {", ".join(missing)}' if missing else '')
            + '. Convert the released rope_{axial,mixed}[_ape]_deit_*_patch16_LS files (their {"model": ...} '
              'state dict) with this family.')


def _depth(state_dict: StateDict, source: str) -> int:
    """The number of blocks, checked to run 0..depth-1 without gaps."""
    indices = sorted({int(match.group(1)) for key in state_dict if (match := BLOCK_KEY.match(key))})
    if indices != list(range(len(indices))):
        raise UnsupportedCheckpointError(f'{source}: its blocks are numbered {indices}, not 0..{len(indices) - 1}; the '
                                         f'file is incomplete.')
    return len(indices)


def _grid_side(state_dict: StateDict, source: str) -> int | None:
    """The training grid's side (patches) from ``pos_embed`` or ``freqs_t_x``; None when the file has neither."""
    sides = {}
    if 'pos_embed' in state_dict:
        sides['pos_embed'] = state_dict['pos_embed'].shape[-2]
    if 'freqs_t_x' in state_dict:
        sides['freqs_t_x'] = state_dict['freqs_t_x'].shape[0]
    for name, tokens in sides.items():
        side = round(tokens ** 0.5)
        if side * side != tokens:
            raise UnsupportedCheckpointError(f'{source}: {name} has {tokens} positions, not a square grid as rope-vit '
                                             f'trains on.')
    if len(set(sides.values())) > 1:
        raise UnsupportedCheckpointError(f'{source}: pos_embed ({sides["pos_embed"]}) and freqs_t_x '
                                         f'({sides["freqs_t_x"]}) disagree on the training grid.')
    if 'freqs_t_x' in state_dict:
        side = round(sides['freqs_t_x'] ** 0.5)
        index = torch.arange(side * side, dtype=torch.float32)
        rows = torch.div(index, side, rounding_mode='floor')
        for name, expected in (('freqs_t_x', index % side), ('freqs_t_y', rows)):
            if name not in state_dict or not torch.equal(state_dict[name].float().cpu(), expected):
                raise UnsupportedCheckpointError(f'{source}: {name} is not the column/row index of a {side}x{side} '
                                                 f'grid (rope-vit\'s init_t_xy), so vispe cannot derive it.')
    return round(next(iter(sides.values())) ** 0.5) if sides else None


def rope_vit_model(state_dict: StateDict, source: str = 'the checkpoint',
                   num_heads: int | None = None) -> dict[str, Any]:
    """The vispe ``TimmViT`` config of a rope-vit DeiT state dict, inferred from its tensors' shapes.

    Args:
        state_dict: rope-vit's names (``cls_token``, ``blocks.i.gamma_1``, ``freqs``, ...).
        source: the file, for error messages.
        num_heads: the head count; default width / 64 (every released rope-vit DeiT).

    Raises:
        UnsupportedCheckpointError: the head count cannot be inferred, or the tensors disagree with each other.
    """
    embed_dim = state_dict['cls_token'].shape[-1]
    in_chans, patch_h, patch = state_dict['patch_embed.proj.weight'].shape[1:]
    if patch_h != patch:
        raise UnsupportedCheckpointError(f'{source}: patch_embed.proj.weight has {patch_h}x{patch} patches; '
                                         f'rope-vit\'s DeiTs use square ones.')
    depth = _depth(state_dict, source)
    if num_heads is None:
        num_heads = heads_of_width(embed_dim, source, 'Give it: vispe convert rope-vit ... --option num_heads=H.')
    if num_heads < 1 or embed_dim % num_heads or (embed_dim // num_heads) % 4:
        raise UnsupportedCheckpointError(f'{source}: {num_heads} heads do not split width {embed_dim} into heads whose '
                                         f'width is a multiple of 4 (2D RoPE rotates x and y pairs).')
    if 'freqs' in state_dict and tuple(state_dict['freqs'].shape) != (2, depth, embed_dim // 2):
        raise UnsupportedCheckpointError(f'{source}: freqs has shape {tuple(state_dict["freqs"].shape)}; a RoPE-Mixed '
                                         f'model of {depth} blocks and width {embed_dim} has (2, {depth}, '
                                         f'{embed_dim // 2}).')
    rope = (dict(type='RoPEMixed', theta=MIXED_THETA) if 'freqs' in state_dict
            else dict(type='RoPEAxial', theta=AXIAL_THETA))
    encoding: Any = rope
    if 'pos_embed' in state_dict:
        encoding = [dict(type='LearnedAPE', no_embed_class=True, antialias=False), rope]
    model: dict[str, Any] = dict(
        type='TimmViT', model_name=VIT_NAMES.get(embed_dim, 'vit_small_patch16_224'),
        num_classes=state_dict['head.weight'].shape[0] if 'head.weight' in state_dict else 0,
        embed_dim=embed_dim, depth=depth, num_heads=num_heads,
        mlp_ratio=state_dict['blocks.0.mlp.fc1.weight'].shape[0] / embed_dim,
        qkv_bias='blocks.0.attn.qkv.bias' in state_dict, init_values=1e-4, class_token=True, global_pool='token',
        in_chans=in_chans, patch_size=patch, encoding=encoding)
    side = _grid_side(state_dict, source)
    if side is not None:
        model['img_size'] = side * patch
    return model


def _target_name(key: str, model: dict[str, Any]) -> str:
    """vispe's name of one of rope-vit's keys."""
    match = re.match(r'^blocks\.(\d+)\.gamma_([12])$', key)
    if match:
        return f'blocks.{match.group(1)}.ls{match.group(2)}.gamma'
    if key == 'freqs':
        return 'encoding.encodings.1.freqs' if isinstance(model['encoding'], list) else 'encoding.freqs'
    return key


def convert_rope_vit_state_dict(state_dict: StateDict, source: str = 'the checkpoint',
                                num_heads: int | None = None) -> Conversion:
    """Convert a rope-vit DeiT state dict (RoPE-Axial / RoPE-Mixed, with or without APE) into a vispe ``TimmViT``'s.

    Args:
        state_dict: the file's ``model`` entry (:func:`vispe.checkpoint.read_state_dict` unwraps it).
        source: the file, for error messages.
        num_heads: the head count; default width / 64, as in every released rope-vit DeiT.

    Returns:
        The :class:`~vispe.converters.Conversion`: tensors under vispe's names, ``freqs_t_x`` / ``freqs_t_y``
        as derived, and the ``TimmViT`` config they load into with ``strict=True``.

    Raises:
        CheckpointFamilyError: keys outside rope-vit's layout.
        UnsupportedCheckpointError: the head count cannot be inferred, or the tensors disagree with each other.
    """
    _refuse_foreign_keys(state_dict, source)
    model = rope_vit_model(state_dict, source, num_heads)
    converted: dict[str, torch.Tensor] = {}
    for key, value in state_dict.items():
        if key in DERIVED:
            continue
        if key == 'freqs':
            value = value.reshape(2, model['depth'], model['num_heads'], -1)
        converted[_target_name(key, model)] = value
    notes = []
    if 'pos_embed' in state_dict and 'freqs' not in state_dict:
        notes.append('pos_embed and no freqs: read as RoPE-Axial + APE (rope_axial_ape_*); rope-vit\'s APE-only '
                     'baseline deit_*_patch16_LS has the same keys and would wrongly gain RoPE here.')
    return Conversion(state_dict=converted, derived=[key for key in DERIVED if key in state_dict], model=model,
                      notes=notes)


ROPE_VIT = register_converter(CheckpointConverter(
    name='rope-vit',
    convert=convert_rope_vit_state_dict,
    summary='RoPE-Axial / RoPE-Mixed DeiT-III ViTs, with or without APE (Heo et al., ECCV 2024; naver-ai/rope-vit) '
            '-> TimmViT with RoPEAxial / RoPEMixed',
    signature=(r'^blocks\.\d+\.gamma_1$', r'^blocks\.\d+\.gamma_2$', r'^freqs$', r'^patch_embed\.proj\.weight$'),
    keys_described='DeiT-III keys with LayerScale (blocks.i.gamma_1, blocks.i.gamma_2) and, for RoPE-Mixed, freqs',
    released='the README of naver-ai/rope-vit: Hugging Face hub naver-ai/rope_{axial,mixed}[_ape]_deit_'
             '{small,base,large}_patch16_LS (pytorch_model.bin) and Google Drive',
    license='Apache-2.0 (naver-ai/rope-vit, LICENSE_rope-vit)',
))
