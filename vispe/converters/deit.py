"""DeiT's tensors in timm's names, read for the families built on a DeiT (``irpe-deit``, ``cpvt``): the sizes a
``TimmViT`` config needs, inferred from the shapes, and the checks that the blocks are all there. Registers no family.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from vispe.converters.registry import CheckpointFamilyError, StateDict, UnsupportedCheckpointError

BLOCK = re.compile(r'^blocks\.(\d+)\.')
BLOCK_KEYS = ('norm1.weight', 'norm1.bias', 'attn.qkv.weight', 'attn.proj.weight', 'attn.proj.bias', 'norm2.weight',
              'norm2.bias', 'mlp.fc1.weight', 'mlp.fc1.bias', 'mlp.fc2.weight', 'mlp.fc2.bias')
# timm names of DeiT's sizes by (width, heads): a converted config names the matching one.
DEIT_NAMES = {(192, 3): 'deit_tiny_patch16_224', (384, 6): 'deit_small_patch16_224', (768, 12): 'deit_base_patch16_224'}
OTHER_SIZES = 'vit_small_patch16_224'  # any timm ViT name: every size is given explicitly
# timm's ViT names by width (a converted config names the matching one; every size is given explicitly anyway).
VIT_NAMES = {192: 'vit_tiny_patch16_224', 384: 'vit_small_patch16_224', 768: 'vit_base_patch16_224',
             1024: 'vit_large_patch16_224'}
# The head width of every released DeiT / ViT (Ti 3, S 6, B 12, L 16 heads); no tensor holds the head count.
HEAD_DIM = 64


def heads_of_width(width: int, source: str, fix: str) -> int:
    """The heads of a ViT ``width`` wide with 64-wide heads (the released models' convention: no tensor says);
    another width is refused, ``fix`` saying how to give the count."""
    if width % HEAD_DIM:
        raise UnsupportedCheckpointError(f'{source}: width {width} is not a multiple of {HEAD_DIM}, the head width of '
                                         f'every released model, and no tensor holds the head count. {fix}')
    return width // HEAD_DIM


def require(state_dict: StateDict, key: str, source: str, what: str, layout: str) -> None:
    """Refuse a file without ``key``, naming what it is and the layout that has it."""
    if key not in state_dict:
        raise CheckpointFamilyError(f'{source} has no {key} ({what}); a {layout} has it.')


def deit_config(state_dict: StateDict, source: str, layout: str,
                heads_of_width: Callable[[int], int]) -> dict[str, Any]:
    """The ``TimmViT`` config of a DeiT's tensors, its encoding aside: width, depth, heads (``heads_of_width(width)``:
    a DeiT's own tensors do not hold them), patch size, channels, MLP ratio, qkv bias, classes; ``img_size`` 224
    (DeiT's), for the caller to set from a ``pos_embed``. ``layout`` names the family's files in error messages.

    Raises:
        CheckpointFamilyError: a distilled DeiT, a hybrid CNN stem, no patch embedding or blocks, or a block without
            one of its tensors.
    """
    if 'dist_token' in state_dict or any(key.startswith('head_dist.') for key in state_dict):
        raise CheckpointFamilyError(f'{source} is a distilled DeiT (dist_token, head_dist.*): vispe converts the '
                                    f'non-distilled models (one head), which are all the authors released.')
    if any(key.startswith('patch_embed.backbone.') for key in state_dict):
        raise CheckpointFamilyError(f'{source} has a hybrid CNN stem (patch_embed.backbone.*): vispe converts DeiTs '
                                    f'with a patch embedding (patch_embed.proj).')
    require(state_dict, 'patch_embed.proj.weight', source, 'the patch embedding', layout)
    proj = state_dict['patch_embed.proj.weight']
    depth = 1 + max((int(match.group(1)) for match in map(BLOCK.match, state_dict) if match), default=-1)
    if depth == 0:
        raise CheckpointFamilyError(f'{source} has no blocks.N.* keys; a {layout} has them.')
    for index in range(depth):
        for name in BLOCK_KEYS:
            require(state_dict, f'blocks.{index}.{name}', source, f'part of block {index} of {depth}', layout)
    width = proj.shape[0]
    num_heads = heads_of_width(width)
    mlp_ratio = state_dict['blocks.0.mlp.fc1.weight'].shape[0] / width
    return dict(type='TimmViT', model_name=DEIT_NAMES.get((width, num_heads), OTHER_SIZES), embed_dim=width,
                depth=depth, num_heads=num_heads, patch_size=proj.shape[-1], img_size=224, in_chans=proj.shape[1],
                mlp_ratio=int(mlp_ratio) if mlp_ratio.is_integer() else mlp_ratio,
                qkv_bias='blocks.0.attn.qkv.bias' in state_dict,
                num_classes=state_dict['head.weight'].shape[0] if 'head.weight' in state_dict else 0)


def pos_embed_img_size(state_dict: StateDict, num_prefix_tokens: int, source: str, why: str = '') -> int:
    """The training size of a square ``pos_embed`` grid (patches × patch size); anything else is refused."""
    pos_embed, proj = state_dict['pos_embed'], state_dict['patch_embed.proj.weight']
    patches = pos_embed.shape[1] - num_prefix_tokens
    grid = round(patches ** 0.5)
    if grid * grid != patches or proj.shape[-1] != proj.shape[-2]:
        raise CheckpointFamilyError(f'{source}: pos_embed {tuple(pos_embed.shape)} holds {patches} patch positions '
                                    f'and patches are {tuple(proj.shape[-2:])}; the models train on a square grid of '
                                    f'square patches{why}.')
    return grid * proj.shape[-1]
