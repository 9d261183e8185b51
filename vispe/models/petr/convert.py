"""Released PETR / 3DPPE checkpoints (mmdet3d 0.17 plugins) into :class:`~vispe.models.petr.PETRDetector`'s keys.

The head maps one to one (``pts_bbox_head.``): the decoder's mmcv ``BaseTransformerLayer`` names become vispe's
:class:`~vispe.models.detr.DecoderLayer` names (``attentions.0/1.attn`` -> ``self_attn``/``cross_attn`` with the
fused ``in_proj`` rows q | k | v as ``qkv``; ``ffns.0.layers.0.0``/``layers.1`` -> ``mlp.0``/``mlp.3``;
``norms.0/1/2`` -> ``norm1/2/3``; ``post_norm`` -> ``norm``), the position modules move under ``encoding.``, and
the last regression layer is re-expressed in vispe's box code (:func:`legacy_regression_rows`). The image
backbone (``img_backbone.``, mmdet's ResNet names = timm's) maps to ``backbone.body.`` by name, but the released
R50 is caffe-style (stride on the first 1×1 of each block, BGR input) with DCN in stages 3-4, so those weights
compute differently in timm's ResNet: fine-tune after converting. What vispe has no module for (the FPN neck, DCN
offsets) is reported, never dropped in silence.
"""
from __future__ import annotations

import re
from typing import Mapping

import torch

from vispe.converters.registry import CheckpointFamilyError, Conversion

HEAD = 'pts_bbox_head.'
DECODER_LAYER = re.compile(r'transformer\.decoder\.layers\.(\d+)\.(.+)')
LAYER_PARTS = {
    'attentions.0.attn.in_proj_weight': 'self_attn.qkv.weight', 'attentions.0.attn.in_proj_bias': 'self_attn.qkv.bias',
    'attentions.0.attn.out_proj.weight': 'self_attn.proj.weight', 'attentions.0.attn.out_proj.bias': 'self_attn.proj.bias',
    'attentions.1.attn.in_proj_weight': 'cross_attn.qkv.weight', 'attentions.1.attn.in_proj_bias': 'cross_attn.qkv.bias',
    'attentions.1.attn.out_proj.weight': 'cross_attn.proj.weight',
    'attentions.1.attn.out_proj.bias': 'cross_attn.proj.bias',
    'ffns.0.layers.0.0.weight': 'mlp.0.weight', 'ffns.0.layers.0.0.bias': 'mlp.0.bias',
    'ffns.0.layers.1.weight': 'mlp.3.weight', 'ffns.0.layers.1.bias': 'mlp.3.bias',
    'norms.0.weight': 'norm1.weight', 'norms.0.bias': 'norm1.bias', 'norms.1.weight': 'norm2.weight',
    'norms.1.bias': 'norm2.bias', 'norms.2.weight': 'norm3.weight', 'norms.2.bias': 'norm3.bias',
}
ENCODING_MODULES = ('position_encoder.', 'adapt_pos3d.', 'query_embedding.', 'depth_net.', 'fuse_lambda')
SAME_NAME = ('input_proj.', 'reference_points.', 'cls_branches.', 'reg_branches.')


DERIVED = ('code_weights', 'project')
BACKBONE_NOTE = ('the released backbones are caffe-style ResNets (and DCN) or VoVNets; their weights load by name '
                 'but compute differently in timm: fine-tune before evaluating')
# A checkpoint of which fewer tensors than this fraction map is another family's, or not a detector's.
MIN_MAPPED_FRACTION = 0.5


def legacy_regression_rows(weight: torch.Tensor) -> torch.Tensor:
    """Rows (or bias entries) of PETR's last regression layer, code ``(x, y, log w, log l, z, log h, sin r, cos r,
    vx, vy)`` with ``r = −yaw − π/2`` (mmdet3d 0.x), re-expressed in vispe's ``(x, y, log l, log w, z, log h,
    sin yaw, cos yaw, vx, vy)``: sizes swapped, ``sin yaw = −cos r`` and ``cos yaw = −sin r``; linear, so exact."""
    rows = weight.clone()
    rows[2], rows[3] = weight[3], weight[2]
    rows[6], rows[7] = -weight[7], -weight[6]
    return rows


def last_regression_layer(keys: list[str]) -> set[str]:
    """The keys of each ``reg_branches.i``'s last Linear (the highest index in the branch)."""
    last: dict[str, int] = {}
    for key in keys:
        match = re.match(r'(reg_branches\.\d+)\.(\d+)\.(weight|bias)$', key)
        if match:
            last[match.group(1)] = max(last.get(match.group(1), -1), int(match.group(2)))
    return {f'{branch}.{index}.{kind}' for branch, index in last.items() for kind in ('weight', 'bias')}


def convert_petr_state_dict(state_dict: Mapping[str, torch.Tensor], source: str = 'the checkpoint') -> Conversion:
    """A released PETR or 3DPPE state dict -> vispe :class:`PETRDetector` keys (see the module docstring).

    Raises:
        CheckpointFamilyError: no key of PETR's head (``pts_bbox_head.``) maps, or fewer than
            :data:`MIN_MAPPED_FRACTION` of the tensors do: the file is another family's (``source`` names it).
    """
    converted: dict[str, torch.Tensor] = {}
    unmapped: list[str] = []
    derived: list[str] = []
    head = {key[len(HEAD):]: value for key, value in state_dict.items() if key.startswith(HEAD)}
    regression_outputs = last_regression_layer(list(head))
    for key, value in state_dict.items():
        if key.startswith('img_backbone.'):
            if '.conv_offset' in key:
                unmapped.append(key)
            else:
                converted['backbone.body.' + key[len('img_backbone.'):]] = value
        elif not key.startswith(HEAD):
            unmapped.append(key)
    for key, value in head.items():
        layer = DECODER_LAYER.fullmatch(key)
        if layer and layer.group(2) in LAYER_PARTS:
            converted[f'decoder.layers.{layer.group(1)}.{LAYER_PARTS[layer.group(2)]}'] = value
        elif key.startswith('transformer.decoder.post_norm.'):
            converted['decoder.norm.' + key.rsplit('.', 1)[1]] = value
        elif key in regression_outputs:
            converted[key] = legacy_regression_rows(value)
        elif key.startswith(SAME_NAME):
            converted[key] = value
        elif key.startswith(ENCODING_MODULES):
            converted['encoding.' + key] = value
        elif key in DERIVED:
            derived.append(HEAD + key)
        else:
            unmapped.append(HEAD + key)
    notes = [BACKBONE_NOTE] if any(key.startswith('backbone.') for key in converted) else []
    conversion = Conversion(converted, unmapped, derived, notes=notes)
    check_family(conversion, state_dict, source)
    return conversion


def check_family(conversion: Conversion, state_dict: Mapping[str, torch.Tensor], source: str) -> None:
    """Refuse a conversion in which no head key, or fewer than :data:`MIN_MAPPED_FRACTION` of the tensors, mapped."""
    head = sum(not key.startswith('backbone.') for key in conversion.state_dict)
    mapped, total = len(conversion.state_dict) + len(conversion.derived), len(state_dict)
    if head and mapped >= MIN_MAPPED_FRACTION * total:
        return
    unmapped = ', '.join(conversion.unmapped[:3]) + (', ...' if len(conversion.unmapped) > 3 else '')
    raise CheckpointFamilyError(
        f'{source} is not a PETR / 3DPPE checkpoint: {mapped} of its {total} tensors map onto PETRDetector, '
        f'{head} of them in the head (pts_bbox_head.*), and a conversion needs the head and at least '
        f'{MIN_MAPPED_FRACTION:.0%} of the tensors. Unmapped keys: {unmapped or "none"}. Convert a checkpoint of '
        f"the authors' PETR or 3DPPE release (its keys start with img_backbone., img_neck., pts_bbox_head.).")
