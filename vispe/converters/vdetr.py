"""V-DETR's released ScanNet checkpoint (Shen et al., "V-DETR: DETR with Vertex Relative Position Encoding for 3D
Object Detection", ICLR 2024; github.com/V-DETR/V-DETR @ c2a1c45a, ``scannet_540ep.pth`` on Hugging Face
byshen/vdetr) into :class:`~vispe.models.vdetr.VDETRHead`.

The file is ``{'model': state_dict, 'optimizer', 'epoch', 'args', 'best_val_metrics'}`` (their ``utils/io.py``);
``args`` is an ``argparse.Namespace``, which vispe's reader accepts as plain data. Module by module:

- ``pre_encoder.*`` (MinkowskiEngine ResNet34), ``up_block_*``, ``out_block_*`` (its FPN): **no vispe module**
  (vispe has no sparse convolution); unmapped. :class:`VDETRHead` takes this backbone's output voxels as input.
- farthest-point sampling of the voxels (no weights): **maps exactly** (vispe's op equals the CUDA kernel's
  definition, except that the kernel never picks a point within √1e-3 m of the origin after the first).
- ``encoder_to_decoder_projection``: **maps exactly** -> ``input_proj`` (1×1 convolution weights squeezed).
- ``decoder.first_layer`` (light FFN), ``decoder.norm``: **map exactly** -> ``proposal_norm``, ``proposal_mlp``,
  ``norm``.
- ``decoder.mlp_heads.{s}`` ``sem_cls_head``/``center_head``/``size_head``: **map exactly** -> ``heads.{s}.cls``,
  ``.center``, ``.size``. ``angle_cls_head``/``angle_residual_head``: unmapped: ScanNet's model has one heading bin,
  whose outputs the reference multiplies by 0 (a file with more bins is refused: rotated boxes are not supported).
- ``decoder.pointcls_heads``: unmapped: a training-only point classifier; at test time its argmax only picks a
  prior box size, 1 m for every class under ``hard_anchor`` (the released training command), i.e. ``anchor_size``.
- ``decoder.query_embed`` (``q_content='random'``), ``decoder.query_pos_projection.{l}``: **map exactly** ->
  ``query_embed``, ``query_pos.{l}``.
- ``decoder.layers.{l}`` (``GlobalDecoderLayer``): **maps exactly** -> ``layers.{l}``
  (:class:`~vispe.models.vdetr.PointDecoderLayer`): ``self_attn.in_proj_*`` -> ``self_attn.qkv``, the cross
  attention's ``q``, ``k``, ``v`` rows concatenated -> ``cross_attn.qkv`` (one key/value head), ``linear1/2`` ->
  ``mlp.0/3``; its ``cpb_mlps`` -> ``encoding.layers.{l}`` (:class:`~vispe.encodings.VertexRPE`, stacked);
  ``relative_coords_table`` is derived (vispe rebuilds it; its size and range give ``table_size`` and
  ``max_value``, and are checked).

What the tensors cannot say is taken from the released ``main.py`` defaults and training command, documented in
``models/released/vdetr/README.md``: ``log_scale`` 512, ``num_samples`` 4096 (``preenc_npoints``), ``anchor_size`` 1
(``hard_anchor``), focal-loss classification (``cls_loss='focalloss_0.25'``), axis-aligned boxes (``angle_type=''``).
"""
from __future__ import annotations

import re
from typing import Any, Mapping

import torch

from vispe.converters.registry import CheckpointConverter, CheckpointFamilyError, Conversion, register_converter
from vispe.encodings.vertex_rpe import reference_vertex_mlps

DECODER_LAYER = re.compile(r'^decoder\.layers\.(\d+)\.(.+)$')
HEAD = re.compile(r'^decoder\.mlp_heads\.(\d+)\.(sem_cls_head|center_head|size_head|angle_cls_head|'
                  r'angle_residual_head)\.layers\.(\d+)\.(.+)$')
QUERY_POS = re.compile(r'^decoder\.query_pos_projection\.(\d+)\.position_embedding_head\.(\d+)\.(.+)$')
HEAD_NAMES = {'sem_cls_head': 'cls', 'center_head': 'center', 'size_head': 'size'}
BACKBONE = ('pre_encoder.', 'up_block_', 'out_block_')
RENAMED = {'encoder_to_decoder_projection.layers.': 'input_proj.', 'decoder.first_layer.norm.': 'proposal_norm.',
           'decoder.first_layer.linear1.': 'proposal_mlp.0.', 'decoder.first_layer.linear2.': 'proposal_mlp.3.',
           'decoder.norm.': 'norm.', 'decoder.query_embed.': 'query_embed.'}
LAYER_PARTS = {'self_attn.in_proj_weight': 'self_attn.qkv.weight', 'self_attn.in_proj_bias': 'self_attn.qkv.bias',
               'self_attn.out_proj.weight': 'self_attn.proj.weight', 'self_attn.out_proj.bias': 'self_attn.proj.bias',
               'multihead_attn.proj.weight': 'cross_attn.proj.weight',
               'multihead_attn.proj.bias': 'cross_attn.proj.bias', 'linear1.weight': 'mlp.0.weight',
               'linear1.bias': 'mlp.0.bias', 'linear2.weight': 'mlp.3.weight', 'linear2.bias': 'mlp.3.bias',
               **{f'norm{i}.{p}': f'norm{i}.{p}' for i in (1, 2, 3) for p in ('weight', 'bias')}}
CROSS_QKV = ('q', 'k', 'v')
# Released settings that no tensor records (main.py defaults and the README's training command).
LOG_SCALE, NUM_SAMPLES, ANCHOR_SIZE = 512.0, 4096, 1.0


def pointwise(value: torch.Tensor) -> torch.Tensor:
    """A 1×1 Conv1d weight (out, in, 1) as a Linear weight (out, in); other tensors unchanged."""
    return value[..., 0] if value.ndim == 3 and value.shape[-1] == 1 else value


def _require(state_dict: Mapping[str, torch.Tensor], key: str, source: str, why: str) -> torch.Tensor:
    if key not in state_dict:
        raise CheckpointFamilyError(f'{source}: no {key} in this V-DETR checkpoint; {why}')
    return state_dict[key]


def infer_model(state_dict: Mapping[str, torch.Tensor], source: str) -> dict[str, Any]:
    """The :class:`VDETRHead` config of a released state dict, from its tensors' shapes (module docstring)."""
    proj = _require(state_dict, 'encoder_to_decoder_projection.layers.0.weight', source,
                    'the projection after the backbone is what every V-DETR model has.')
    embed_dim, in_channels = proj.shape[:2]
    layers = sorted({int(m.group(1)) for key in state_dict if (m := DECODER_LAYER.match(key))})
    if not layers or layers != list(range(len(layers))):
        raise CheckpointFamilyError(f'{source}: decoder layers {layers} are not 0..L-1; a V-DETR checkpoint has '
                                    f'decoder.layers.0 ... decoder.layers.{{dec_nlayers - 2}}.')
    kv_rows = _require(state_dict, 'decoder.layers.0.multihead_attn.k.weight', source,
                       'vispe maps the shared-key cross-attention (GlobalShareCrossAttention).').shape[0]
    for index in layers:
        found = tuple(_require(state_dict, f'decoder.layers.{index}.multihead_attn.q.weight', source,
                               'vispe maps the shared-key cross-attention (GlobalShareCrossAttention).').shape)
        if found != (embed_dim, embed_dim) or embed_dim % kv_rows:
            raise CheckpointFamilyError(f'{source}: encoder_to_decoder_projection gives width {embed_dim}, so '
                                        f'decoder.layers.{index}.multihead_attn.q.weight should be '
                                        f'{(embed_dim, embed_dim)} with key rows dividing it; found {found} and '
                                        f'{kv_rows} key rows. The file mixes models of two widths.')
    mlp_dim = state_dict['decoder.layers.0.linear1.weight'].shape[0]
    first = _require(state_dict, 'decoder.first_layer.linear1.weight', source, 'the light FFN layer is missing.')
    if first.shape[0] != mlp_dim:
        raise CheckpointFamilyError(f'{source}: the light FFN is {first.shape[0]} wide and the decoder layers\' FFN '
                                    f'{mlp_dim}; VDETRHead gives both mlp_dim (V-DETR\'s dec_ffn_dim).')
    table = _require(state_dict, 'decoder.layers.0.multihead_attn.relative_coords_table', source,
                     'the 3DV-RPE table is missing.')
    query_embed = _require(state_dict, 'decoder.query_embed.weight', source,
                           "VDETRHead's queries have learned content (q_content='random', the released setting).")
    rpe_hidden = state_dict['decoder.layers.0.multihead_attn.cpb_mlps.0.0.weight'].shape[0]
    return dict(type='VDETRHead', in_channels=in_channels, embed_dim=embed_dim, depth=len(layers),
                num_heads=embed_dim // kv_rows, mlp_dim=mlp_dim,
                num_classes=state_dict['decoder.mlp_heads.1.sem_cls_head.layers.8.weight'].shape[0],
                proposal_logits=state_dict['decoder.mlp_heads.0.sem_cls_head.layers.8.weight'].shape[0],
                num_queries=query_embed.shape[0], num_samples=NUM_SAMPLES, anchor_size=ANCHOR_SIZE,
                encoding=dict(type='VertexRPE', hidden_dim=rpe_hidden, log_scale=LOG_SCALE,
                              max_value=float(table.max()), table_size=table.shape[1]))


def check_table(table: torch.Tensor, encoding: Mapping[str, Any], key: str, source: str) -> None:
    """Refuse a ``relative_coords_table`` that is not the linspace grid VertexRPE rebuilds."""
    nodes = torch.linspace(-encoding['max_value'], encoding['max_value'], encoding['table_size'])
    expected = torch.stack(torch.meshgrid(nodes, nodes, nodes, indexing='ij'), dim=-1)[None]
    if table.shape != expected.shape or not torch.allclose(table.float(), expected, atol=1e-6):
        raise CheckpointFamilyError(f'{source}: {key} is not the {encoding["table_size"]}³ grid of linspace('
                                    f'-{encoding["max_value"]}, {encoding["max_value"]}) that VertexRPE rebuilds.')


def convert_vdetr_state_dict(state_dict: Mapping[str, torch.Tensor], source: str = 'the checkpoint') -> Conversion:
    """A released V-DETR state dict -> :class:`VDETRHead` keys and config (module docstring).

    Raises:
        CheckpointFamilyError: a V-DETR variant vispe does not compute (rotated boxes, keys with positions,
            shared-key self-attention, no learned query content) or keys no part of V-DETR has; ``source`` named.
    """
    model = infer_model(state_dict, source)
    converted: dict[str, torch.Tensor] = {}
    unmapped: list[str] = []
    derived: list[str] = []
    unknown: list[str] = []
    for key, value in state_dict.items():
        renamed = next((vispe + key[len(prefix):] for prefix, vispe in RENAMED.items() if key.startswith(prefix)),
                       None)
        layer, head, query_pos = DECODER_LAYER.match(key), HEAD.match(key), QUERY_POS.match(key)
        if key.startswith(BACKBONE) or key.startswith('decoder.pointcls_heads.'):
            unmapped.append(key)
        elif renamed is not None:
            converted[renamed] = pointwise(value)
        elif head:
            stage, name, index, part = head.groups()
            if name.startswith('angle'):
                if int(index) == 8 and value.shape[0] != 1:
                    raise CheckpointFamilyError(f'{source}: {key} predicts {value.shape[0]} heading bins; VDETRHead '
                                                f'computes axis-aligned boxes (ScanNet\'s one bin), not rotated ones.')
                unmapped.append(key)
            else:
                converted[f'heads.{stage}.{HEAD_NAMES[name]}.{index}.{part}'] = pointwise(value)
        elif query_pos:
            converted[f'query_pos.{query_pos.group(1)}.{query_pos.group(2)}.{query_pos.group(3)}'] = pointwise(value)
        elif layer and layer.group(2) in LAYER_PARTS:
            converted[f'layers.{layer.group(1)}.{LAYER_PARTS[layer.group(2)]}'] = value
        elif layer and layer.group(2) == 'multihead_attn.relative_coords_table':
            check_table(value, model['encoding'], key, source)
            derived.append(key)
        elif not (layer and re.match(r'multihead_attn\.(q|k|v|cpb_mlps)\.', layer.group(2))):
            unknown.append(key)
    if unknown:
        raise CheckpointFamilyError(f'{source}: {len(unknown)} keys belong to no part of V-DETR that vispe maps '
                                    f'({", ".join(unknown[:4])}{", ..." if len(unknown) > 4 else ""}); variants with '
                                    f'pos_for_key, share_selfattn or mlp_sep=False are not supported.')
    for index in range(model['depth']):
        prefix = f'decoder.layers.{index}.multihead_attn.'
        for part in ('weight', 'bias'):
            converted[f'layers.{index}.cross_attn.qkv.{part}'] = torch.cat(
                [state_dict[f'{prefix}{name}.{part}'] for name in CROSS_QKV])
        for name, value in reference_vertex_mlps(dict(state_dict), prefix).items():
            converted[f'encoding.layers.{index}.{name}'] = value
    notes = [f'no tensor records log_scale, num_samples, anchor_size: the released values ({LOG_SCALE:g}, '
             f'{NUM_SAMPLES}, {ANCHOR_SIZE:g} m) are used; the sparse-convolution backbone is unmapped, so the '
             f'model takes its output voxels (VDETRHead)']
    return Conversion(converted, unmapped, derived, model, notes)


VDETR = register_converter(CheckpointConverter(
    name='vdetr',
    convert=convert_vdetr_state_dict,
    summary='V-DETR (V-DETR/V-DETR, ICLR 2024) ScanNet detector -> VDETRHead (decoder, 3DV-RPE, heads); the '
            'MinkowskiEngine ResNet34+FPN backbone has no vispe module and is listed',
    signature=(r'^encoder_to_decoder_projection\.', r'^decoder\.layers\.\d+\.multihead_attn\.cpb_mlps\.',
               r'^decoder\.mlp_heads\.\d+\.sem_cls_head\.'),
    keys_described='keys (encoder_to_decoder_projection.*, decoder.layers.N.multihead_attn.cpb_mlps.*, '
                   'decoder.mlp_heads.N.*)',
    released='scannet_540ep.pth on Hugging Face byshen/vdetr (linked from the V-DETR/V-DETR README); no SUN RGB-D '
             'checkpoint is released',
    license='none stated: V-DETR/V-DETR has no LICENSE file (at c2a1c45a); ask the authors before redistributing',
))
