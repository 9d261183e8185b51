"""DETR (Carion et al., "End-to-End Object Detection with Transformers", ECCV 2020; facebookresearch/detr) as the
registered families ``detr`` and ``detr-dc5``: its released COCO detectors onto :class:`vispe.models.detr.DETR`.

The released files (``detr-r50-e632da11.pth``, ``detr-r101-2c7b67e5.pth``, ``detr-r50-dc5-f0fb7ef5.pth``,
``detr-r101-dc5-a2e86def.pth``) hold ``{'model': state_dict}`` (plus the optimiser and training args in some;
:func:`vispe.checkpoint.read_state_dict` takes the ``model`` entry). Their keys map as follows:

- ``backbone.0.body.*``, a torchvision ResNet with DETR's ``FrozenBatchNorm2d`` (weight, bias, running mean and
  variance; eps 1e-5) -> ``backbone.body.*``, the same names in timm's ResNet (``features_only`` keeps them), frozen
  with torchvision's ``FrozenBatchNorm2d`` (eps 1e-5, the same formula). timm's ResNet-50/101 put the stride on the
  3x3 convolution as torchvision does ("ResNet v1.5"), and timm's ``output_stride=16`` dilates the last stage as
  torchvision's ``replace_stride_with_dilation=[False, False, True]`` (DC5) does: the first block of the stage keeps
  dilation 1, the others get 2. The depth (ResNet-18/34/50/101/152) is read from the blocks per stage.
- ``input_proj``, ``query_embed``, ``class_embed`` keep their names; ``bbox_embed.layers.{0,1,2}`` ->
  ``bbox_embed.{0,2,4}`` (vispe's box MLP is one Sequential with the ReLUs between).
- ``transformer.encoder.layers.N``: ``self_attn.in_proj_*`` (nn.MultiheadAttention, rows q | k | v) ->
  ``encoder.layers.N.attn.qkv.*`` (the same rows), ``self_attn.out_proj`` -> ``attn.proj``, ``linear1``/``linear2``
  -> ``mlp.0``/``mlp.3``, ``norm1``/``norm2`` as they are.
- ``transformer.decoder.layers.N``: ``self_attn`` -> ``self_attn``, ``multihead_attn`` -> ``cross_attn`` (both as
  above), ``linear1``/``linear2`` -> ``mlp.0``/``mlp.3``, ``norm1-3``; ``transformer.decoder.norm`` ->
  ``decoder.norm``.

The rest has no weights and is the same computation in vispe: post-norm layers; the sine embedding
(``PositionEmbeddingSine(hidden/2, normalize=True)``: :class:`~vispe.encodings.DETRSine`, temperature 10000,
scale 2 pi, each image's real extent from the padding mask) added to the queries and keys of every encoder layer
and to the memory's keys in the decoder's cross-attention, never to values; the object queries added to the
queries and keys of the decoder's self-attention and to its cross-attention's queries; the decoder starting from
zeros; the padding mask resized to the feature grid by nearest interpolation; every decoder layer's output through
the shared final norm (the auxiliary outputs). vispe's masks are True on real pixels (DETR's on padding).

Heads cannot be read from the shapes: the released models use 8, the default; ``convert_detr_state_dict(...,
num_heads=H)`` converts a model trained with other heads. DC5 cannot be read from them either: the ``detr-dc5``
family builds the dilated backbone.

Labels: DETR's COCO models have 92 logits, indexed by COCO category id (0 and the ids COCO skips are never
positives) plus the last, no-object; the converted model has ``num_classes=91`` and predicts category ids, which
:class:`~vispe.evaluation.CocoMetric` scores with ``labels='category_id'`` (configs/released/detr-r50_coco-val.py).

Unmapped (listed): ``num_batches_tracked`` counters (frozen BatchNorm keeps none), and the panoptic models'
(``detr-r50-panoptic-*.pth``: the detector under ``detr.``) ``bbox_attention.*`` and ``mask_head.*``, which vispe
has no module for; their detector converts. Refused, naming the fix: pre-norm models (``--pre_norm``: an encoder
final norm; vispe's DETR is post-norm), the learned position embedding (``--position_embedding learned``), a box
MLP of other than 3 layers, and backbones other than torchvision's ResNet-18/34/50/101/152.
"""
from __future__ import annotations

import re
from typing import Any

import torch

from vispe.converters.registry import (CheckpointConverter, Conversion, StateDict, UnsupportedCheckpointError,
                                       register_converter)

RESNET_DEPTHS = {('basic', (2, 2, 2, 2)): 'resnet18', ('basic', (3, 4, 6, 3)): 'resnet34',
                 ('bottleneck', (3, 4, 6, 3)): 'resnet50', ('bottleneck', (3, 4, 23, 3)): 'resnet101',
                 ('bottleneck', (3, 8, 36, 3)): 'resnet152'}
RESNET_WIDTHS = (64, 128, 256, 512)
RESNET_STEM = 64
PANOPTIC_PREFIX = 'detr.'
PANOPTIC_HEADS = ('bbox_attention.', 'mask_head.')
LAYER_NAMES = {'linear1': 'mlp.0', 'linear2': 'mlp.3', 'norm1': 'norm1', 'norm2': 'norm2', 'norm3': 'norm3'}
ATTENTION_NAMES = {'in_proj_weight': 'qkv.weight', 'in_proj_bias': 'qkv.bias', 'out_proj.weight': 'proj.weight',
                   'out_proj.bias': 'proj.bias'}
LAYER_KEY = re.compile(r'^transformer\.(encoder|decoder)\.layers\.(\d+)\.(\w+)\.(.+)$')


def _refuse(source: str, problem: str) -> UnsupportedCheckpointError:
    return UnsupportedCheckpointError(f'{source}: {problem}')


def _layer_key(key: str, source: str) -> str:
    """The vispe name of one encoder or decoder layer's tensor."""
    match = LAYER_KEY.match(key)
    if match is None:
        raise _refuse(source, f'unknown DETR transformer key {key!r}; DETR layers hold self_attn, multihead_attn '
                              f'(decoder), linear1, linear2, norm1-3.')
    part, index, module, rest = match.groups()
    if module in ('self_attn', 'multihead_attn') and rest in ATTENTION_NAMES:
        attention = {'encoder': 'attn', 'decoder': 'self_attn'}[part] if module == 'self_attn' else 'cross_attn'
        if module == 'multihead_attn' and part == 'encoder':
            raise _refuse(source, f'{key!r}: an encoder layer with cross-attention is not DETR\'s encoder.')
        return f'{part}.layers.{index}.{attention}.{ATTENTION_NAMES[rest]}'
    if module in LAYER_NAMES and rest in ('weight', 'bias') and not (part == 'encoder' and module == 'norm3'):
        return f'{part}.layers.{index}.{LAYER_NAMES[module]}.{rest}'
    raise _refuse(source, f'unknown DETR transformer key {key!r}; DETR layers hold self_attn, multihead_attn '
                          f'(decoder), linear1, linear2, norm1-3.')


def _rename(key: str, source: str) -> str:
    """The vispe name of one DETR detector key (the panoptic prefix already removed)."""
    if key.startswith('backbone.0.body.'):
        return 'backbone.body.' + key[len('backbone.0.body.'):]
    if key.startswith('backbone.1.'):
        raise _refuse(source, f'{key!r} is a learned position embedding (DETR --position_embedding learned); '
                              f'vispe converts the sine-embedding models DETR released. Convert one of those.')
    if key == 'transformer.encoder.norm.weight' or key == 'transformer.encoder.norm.bias':
        raise _refuse(source, f'{key!r}: a pre-norm DETR (--pre_norm: the encoder ends with a norm); vispe\'s DETR '
                              f'is post-norm, as the released models are, and would compute otherwise.')
    if key.startswith('transformer.decoder.norm.'):
        return 'decoder.norm.' + key[len('transformer.decoder.norm.'):]
    if key.startswith('transformer.'):
        return _layer_key(key, source)
    match = re.match(r'^bbox_embed\.layers\.(\d+)\.(weight|bias)$', key)
    if match:
        return f'bbox_embed.{2 * int(match.group(1))}.{match.group(2)}'
    if key.split('.')[0] in ('input_proj', 'query_embed', 'class_embed') and key.split('.')[-1] in ('weight', 'bias'):
        return key
    raise _refuse(source, f'{key!r} is no key of DETR\'s detector (backbone.0.body, input_proj, query_embed, '
                          f'transformer, class_embed, bbox_embed); is it a DETR checkpoint?')


def _count(keys: list[str], pattern: str) -> int:
    """1 + the largest index the regex's group matches in ``keys`` (0 when none)."""
    indices = [int(m.group(1)) for m in map(re.compile(pattern).match, keys) if m]
    return max(indices) + 1 if indices else 0


def _backbone(state_dict: dict[str, torch.Tensor], source: str, dilation: bool) -> dict[str, Any]:
    """timm's ResNet of the same depth and widths as the file's torchvision ResNet (``backbone.body.*``)."""
    keys = list(state_dict)
    blocks = tuple(_count(keys, rf'^backbone\.body\.layer{stage}\.(\d+)\.') for stage in range(1, 5))
    kind = 'bottleneck' if 'backbone.body.layer1.0.conv3.weight' in state_dict else 'basic'
    name = RESNET_DEPTHS.get((kind, blocks))
    if name is None or 'backbone.body.conv1.weight' not in state_dict:
        raise _refuse(source, f'the backbone is not a torchvision ResNet-18/34/50/101/152 (found {kind} blocks '
                              f'{list(blocks)} per stage); DETR released ResNet-50 and -101 models.')
    widths = tuple(int(state_dict[f'backbone.body.layer{stage}.0.conv1.weight'].shape[0]) for stage in range(1, 5))
    if kind == 'bottleneck':
        outputs = [int(state_dict[f'backbone.body.layer{stage}.0.conv3.weight'].shape[0]) for stage in range(1, 5)]
        if outputs != [4 * width for width in widths]:
            raise _refuse(source, f'bottleneck blocks {list(widths)} wide with {outputs} outputs: a wide ResNet or '
                                  f'ResNeXt, which the DETR converter does not map (it expects 4x the width).')
    stem = int(state_dict['backbone.body.conv1.weight'].shape[0])
    if stem != RESNET_STEM:
        raise _refuse(source, f'the backbone\'s stem has {stem} channels; torchvision\'s and timm\'s ResNets have '
                              f'{RESNET_STEM}.')
    backbone: dict[str, Any] = dict(type='TimmFeatures', model_name=name, out_index=-1, pretrained=False,
                                    frozen_bn=True)
    model_kwargs: dict[str, Any] = {} if widths == RESNET_WIDTHS else dict(channels=widths)
    if dilation:
        if kind == 'basic':
            raise _refuse(source, f'a dilated (DC5) {name}: torchvision\'s basic blocks have no dilation, so DETR '
                                  f'cannot have trained one; convert it with `vispe convert detr`.')
        model_kwargs['output_stride'] = 16
    if model_kwargs:
        backbone['model_kwargs'] = model_kwargs
    return backbone


def _transformer(state_dict: dict[str, torch.Tensor], source: str, part: str, num_heads: int) -> dict[str, Any]:
    """depth, heads, FFN width and DETR's sine embedding of the encoder or decoder (every layer alike)."""
    depth = _count(list(state_dict), rf'^{part}\.layers\.(\d+)\.')
    if depth == 0:
        raise _refuse(source, f'no transformer.{part}.layers.* keys: a DETR detector has both encoder and decoder.')
    mlp_dims = {int(state_dict[f'{part}.layers.{i}.mlp.0.weight'].shape[0]) for i in range(depth)
                if f'{part}.layers.{i}.mlp.0.weight' in state_dict}
    if len(mlp_dims) != 1:
        raise _refuse(source, f'the {part} layers have FFN widths {sorted(mlp_dims)}; vispe builds one width.')
    return dict(depth=depth, num_heads=num_heads, mlp_dim=mlp_dims.pop(), dropout=0.1, encoding=dict(type='DETRSine'))


def convert_detr_state_dict(state_dict: StateDict, source: str = 'the checkpoint', num_heads: int = 8,
                            dilation: bool = False) -> Conversion:
    """facebookresearch/detr's detector state dict -> vispe's :class:`~vispe.models.detr.DETR` names and config.

    Args:
        state_dict: the ``model`` entry of a released file (a panoptic file's ``detr.`` detector too).
        source: the file, named in errors.
        num_heads: attention heads (8 in every released model; shapes do not tell them).
        dilation: the backbone's last stage dilated instead of strided (the DC5 models).

    Raises:
        ValueError: a key DETR's detector does not have, a pre-norm or learned-embedding model, another backbone,
            or a width that ``num_heads`` does not divide (the message names it and the fix).
    """
    renamed: dict[str, torch.Tensor] = {}
    unmapped: list[str] = []
    for key, value in state_dict.items():
        name = key[len(PANOPTIC_PREFIX):] if key.startswith(PANOPTIC_PREFIX) else key
        if name.startswith(PANOPTIC_HEADS) or name.endswith('num_batches_tracked'):
            unmapped.append(key)
            continue
        renamed[_rename(name, source)] = value
    for required in ('input_proj.weight', 'query_embed.weight', 'class_embed.weight'):
        if required not in renamed:
            raise _refuse(source, f'no {required}: not a whole DETR detector (a backbone alone has no DETR config).')
    if sorted(k for k in renamed if k.startswith('bbox_embed.')) != [f'bbox_embed.{i}.{p}' for i in (0, 2, 4)
                                                                     for p in ('bias', 'weight')]:
        raise _refuse(source, 'the box MLP (bbox_embed.layers.*) is not DETR\'s 3 layers with biases, which vispe '
                              'builds.')
    embed_dim = int(renamed['input_proj.weight'].shape[0])
    if num_heads < 1 or embed_dim % num_heads:
        raise _refuse(source, f'num_heads={num_heads} does not divide the width {embed_dim}; give the heads the '
                              f'model was trained with (8 in DETR\'s released models).')
    backbone = _backbone(renamed, source, dilation)
    model = dict(type='DETR', backbone=backbone, num_classes=int(renamed['class_embed.weight'].shape[0]) - 1,
                 num_queries=int(renamed['query_embed.weight'].shape[0]), embed_dim=embed_dim, image_size=800,
                 encoder=_transformer(renamed, source, 'encoder', num_heads),
                 decoder=_transformer(renamed, source, 'decoder', num_heads), aux_loss=True)
    notes = [f'attention heads: {num_heads} (not in the tensors; DETR\'s released models use 8)']
    if model['num_classes'] == 91:
        notes.append('91 classes: logits are indexed by COCO category id; score them with '
                     "CocoMetric(labels='category_id') as configs/released/detr-r50_coco-val.py does")
    if not dilation and re.search(r'dc5', source, re.IGNORECASE):
        notes.append(f'{source} is named like a DC5 model, whose last stage is dilated: if it is one, convert it '
                     f'with `vispe convert detr-dc5` (the tensors are the same, the backbone computes otherwise)')
    return Conversion(state_dict=renamed, unmapped=unmapped, model=model, notes=notes)


def convert_detr_dc5_state_dict(state_dict: StateDict, source: str = 'the checkpoint') -> Conversion:
    """:func:`convert_detr_state_dict` of a DC5 model (ResNet's last stage dilated, stride 16)."""
    return convert_detr_state_dict(state_dict, source, dilation=True)


SIGNATURE = (r'backbone\.0\.body\.', r'transformer\.encoder\.layers\.\d+\.self_attn\.in_proj_weight',
             r'transformer\.decoder\.layers\.\d+\.multihead_attn\.', r'(^|\.)query_embed\.weight$',
             r'(^|\.)bbox_embed\.layers\.\d+\.')
KEYS_DESCRIBED = ('keys (backbone.0.body.*, transformer.encoder/decoder.layers.* with nn.MultiheadAttention, '
                  'query_embed, class_embed, bbox_embed.layers.*)')
LICENSE = 'Apache-2.0 (the LICENSE of facebookresearch/detr)'
RELEASED = 'the README of facebookresearch/detr (dl.fbaipublicfiles.com/detr/detr-r50-e632da11.pth, ...)'

DETR_CONVERTER = register_converter(CheckpointConverter(
    name='detr', convert=convert_detr_state_dict,
    summary='DETR (facebookresearch/detr) R50/R101 COCO detectors -> vispe DETR with DETRSine',
    signature=SIGNATURE, keys_described=KEYS_DESCRIBED, released=RELEASED, license=LICENSE))
DETR_DC5_CONVERTER = register_converter(CheckpointConverter(
    name='detr-dc5', convert=convert_detr_dc5_state_dict,
    summary='DETR-DC5 (facebookresearch/detr) R50/R101 COCO detectors, last ResNet stage dilated -> vispe DETR '
            'with DETRSine and a stride-16 backbone',
    signature=SIGNATURE, keys_described=KEYS_DESCRIBED, released=RELEASED, license=LICENSE))
