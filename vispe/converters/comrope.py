"""ComRoPE (Yu et al., "ComRoPE: Scalable and Robust Rotary Position Embedding Parameterized by Trainable Commuting
Angle Matrices", CVPR 2025; Longin-Yu/ComRoPE) as a registered family: its CLIP-style ViTs -> ``TimmViT`` with the
``ComRoPE`` encoding (AP or LD).

Released weights: none. The repository (``model.py`` only, no training script) links no checkpoint; its models are
HuggingFace ``transformers`` modules (``CustomVIT(CLIPVisionModel)``, ``CustomVITForClassification``), whose
``state_dict()`` / ``save_pretrained`` files this converter reads (``.bin``, ``.pth`` or ``.safetensors``).

The architecture is transformers' CLIP vision tower, not its ViT: every name maps onto timm's pre-norm ViT with
``pre_norm=True`` (CLIP's ``pre_layrnorm``, and a patch embedding without bias), ``act_layer='quick_gelu'`` and
``norm_eps=1e-5`` (``CLIPVisionConfig``'s defaults ``hidden_act='quick_gelu'`` and ``layer_norm_eps=1e-5``, which
are in the file's config.json, not in its tensors: if yours differ, give ``vispe convert --config`` a model with
them):

* ``vision_model.embeddings.class_embedding`` -> ``cls_token``; ``...patch_embedding.weight`` -> ``patch_embed.proj``;
* ``vision_model.pre_layrnorm`` -> ``norm_pre``; ``vision_model.post_layernorm`` -> ``norm`` (CLIP normalises the
  pooled class token, timm every token before pooling it: the class token's value is the same);
* ``encoder.layers.N.self_attn.{q,k,v}_proj`` -> ``blocks.N.attn.qkv`` (stacked q, k, v); ``out_proj`` ->
  ``attn.proj``; ``layer_norm1/2`` -> ``norm1/2``; ``mlp.fc1/2`` -> ``mlp.fc1/2``;
* ``encoder.layers.N.self_attn.freqs`` (heads, 1, d/b, b, b) -> ``encoding.freqs`` (depth, heads, d/b, b, b);
  LD's ``multiplier`` (1, 2, d/b, 1, 1) -> ``encoding.multiplier`` (depth, 2, d/b). AP and LD are told apart by the
  multiplier, the block size b by the shape;
* ``classification_head`` (``mlp_intermediate=0``: one linear layer) -> ``head``; ``classification_head.0`` / ``.2``
  (``mlp_intermediate > 0``: linear, ReLU, linear) -> ``head.fc1`` / ``head.fc2`` with ``head_act='relu'``; a
  ``CustomVIT`` without the head gives ``num_classes=0`` (the pooled, normalised class token).

Positions, the class token at the centre (0.5, 0.5) and rotated, and the q scaling before the rotation are those of
vispe's ``ComRoPE`` (the golden test: logits within 1e-5 at the training size and a larger one). The reference takes
its positions as an argument (``CustomVITConfig.get_positions``); vispe builds the same from the grid
(``axis_scale=True``, ``cls_position=0.5``, the defaults).

Refused, with the reason: an absolute embedding ``vision_model.embeddings.position_embedding``, present whenever
``keep_ape=False`` (the reference's default: the flag reads inverted). The reference samples it with
``grid_sample`` at (0, row, col), which grid_sample reads as (x, y, z): the column lands on the singleton frame
axis, so it depends on the row only and is read at the middle column; no vispe encoding computes that. Also
refused: LieRE (``freqs`` (heads, 2, ...): non-commuting generators, no vispe encoding), and files with no
generators (vanilla RoPE keeps its frequencies in a non-persistent buffer, so its files hold none). Nothing is
unmapped.
"""
from __future__ import annotations

import re
from typing import Any

import torch

from vispe.converters.lookhere import vit_arguments
from vispe.converters.registry import (CheckpointConverter, CheckpointFamilyError, Conversion, StateDict,
                                       UnsupportedCheckpointError, register_converter)

PREFIX = 'vision_model.'
LAYER = re.compile(r'^vision_model\.encoder\.layers\.(?P<index>\d+)\.(?P<rest>.+)$')
# Per-layer names -> vispe's (under blocks.N.); q/k/v and the generators are handled apart.
LAYER_NAMES = {'self_attn.out_proj': 'attn.proj', 'layer_norm1': 'norm1', 'layer_norm2': 'norm2',
               'mlp.fc1': 'mlp.fc1', 'mlp.fc2': 'mlp.fc2'}
TOP_NAMES = {'vision_model.embeddings.class_embedding': 'cls_token',
             'vision_model.embeddings.patch_embedding.weight': 'patch_embed.proj.weight',
             'vision_model.pre_layrnorm.weight': 'norm_pre.weight', 'vision_model.pre_layrnorm.bias': 'norm_pre.bias',
             'vision_model.post_layernorm.weight': 'norm.weight', 'vision_model.post_layernorm.bias': 'norm.bias'}
HEADS = {'classification_head.weight': 'head.weight', 'classification_head.bias': 'head.bias',
         'classification_head.0.weight': 'head.fc1.weight', 'classification_head.0.bias': 'head.fc1.bias',
         'classification_head.2.weight': 'head.fc2.weight', 'classification_head.2.bias': 'head.fc2.bias'}


def _layers(state_dict: StateDict) -> dict[int, dict[str, torch.Tensor]]:
    """The encoder layers' tensors by index, names relative to the layer."""
    layers: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in state_dict.items():
        match = LAYER.match(key)
        if match:
            layers.setdefault(int(match['index']), {})[match['rest']] = value
    return layers


def _check_variant(state_dict: StateDict, layers: dict[int, dict[str, torch.Tensor]], source: str) -> str:
    """'AP' or 'LD' from the generators; refuses the variants vispe does not compute."""
    ape = 'vision_model.embeddings.position_embedding'
    if ape in state_dict:
        raise UnsupportedCheckpointError(
            f'{source} has {ape} {tuple(state_dict[ape].shape)} (a model built with keep_ape=False, the reference\'s '
            f'default). The reference samples it with grid_sample at (0, row, col), so it depends on the row only; no '
            f'vispe encoding computes that. Only ComRoPE models built with keep_ape=True convert exactly.')
    freqs = [layer.get('self_attn.freqs') for layer in layers.values()]
    if any(value is None for value in freqs):
        raise CheckpointFamilyError(f'{source} has no ComRoPE generators (encoder.layers.N.self_attn.freqs): a CLIP '
                                    f'vision model with an absolute embedding, none, or vanilla RoPE (its frequencies '
                                    f'are a non-persistent buffer, not in the file). Only ComRoPE-AP/LD convert.')
    if freqs[0].ndim != 5 or freqs[0].shape[1] != 1:
        raise UnsupportedCheckpointError(f'{source}: self_attn.freqs has shape {tuple(freqs[0].shape)}; ComRoPE has '
                                         f'(heads, 1, d/b, b, b). (heads, 2, ...) is LieRE, whose generators do not '
                                         f'commute: no vispe encoding computes it.')
    with_multiplier = {'self_attn.multiplier' in layer for layer in layers.values()}
    if len(with_multiplier) != 1:
        raise UnsupportedCheckpointError(f'{source}: some layers have self_attn.multiplier and others not.')
    return 'LD' if with_multiplier.pop() else 'AP'


def convert_comrope(state_dict: StateDict, source: str = 'the checkpoint') -> Conversion:
    """ComRoPE's CLIP-style state dict -> the ``TimmViT`` + ``ComRoPE`` model that computes the same outputs (see the
    module docstring)."""
    layers = _layers(state_dict)
    if not layers or sorted(layers) != list(range(len(layers))):
        raise CheckpointFamilyError(f'{source}: the encoder layers are {sorted(layers)}; a ComRoPE model has '
                                    f'vision_model.encoder.layers.0 ... N-1.')
    variant = _check_variant(state_dict, layers, source)
    freqs = layers[0]['self_attn.freqs']
    num_heads, num_blocks, block_size = freqs.shape[0], freqs.shape[2], freqs.shape[-1]
    embed_dim = layers[0]['self_attn.q_proj.weight'].shape[0]
    if num_blocks * block_size * num_heads != embed_dim:
        raise UnsupportedCheckpointError(f'{source}: freqs {tuple(freqs.shape)} gives head_dim '
                                         f'{num_blocks * block_size} x {num_heads} heads != width {embed_dim}.')
    converted: dict[str, torch.Tensor] = {}
    for key, target in TOP_NAMES.items():
        if key not in state_dict:
            raise CheckpointFamilyError(f'{source} has no {key}, which every ComRoPE (CLIP vision) model has.')
        converted[target] = state_dict[key]
    converted['cls_token'] = converted['cls_token'].reshape(1, 1, -1)
    for index, layer in layers.items():
        block = f'blocks.{index}.'
        for part in ('weight', 'bias'):
            converted[f'{block}attn.qkv.{part}'] = torch.cat([layer[f'self_attn.{name}_proj.{part}']
                                                              for name in ('q', 'k', 'v')])
            for name, target in LAYER_NAMES.items():
                converted[f'{block}{target}.{part}'] = layer[f'{name}.{part}']
    converted['encoding.freqs'] = torch.stack([layers[index]['self_attn.freqs'][:, 0] for index in sorted(layers)])
    if variant == 'LD':
        converted['encoding.multiplier'] = torch.stack([layers[index]['self_attn.multiplier'].reshape(2, -1)
                                                        for index in sorted(layers)])
    converted.update({target: state_dict[key] for key, target in HEADS.items() if key in state_dict})
    used = {*TOP_NAMES, *(key for key in HEADS if key in state_dict),
            *(key for key in state_dict if LAYER.match(key))}
    foreign = [key for key in state_dict if key not in used]
    known_layer = {'self_attn.freqs', 'self_attn.multiplier', *(f'self_attn.{n}_proj.{p}' for n in 'qkv'
                                                                 for p in ('weight', 'bias')),
                   *(f'{name}.{p}' for name in LAYER_NAMES for p in ('weight', 'bias'))}
    foreign += [f'vision_model.encoder.layers.{i}.{rest}' for i, layer in layers.items() for rest in layer
                if rest not in known_layer]
    if foreign:
        raise CheckpointFamilyError(f'{source} has keys outside the ComRoPE CLIP-ViT layout: {foreign[:8]}.')
    return Conversion(converted, model=_model(converted, variant, num_heads, block_size, len(layers), embed_dim),
                      notes=[f'ComRoPE-{variant}, block size {block_size}, {num_heads} heads; assumes '
                             f"CLIPVisionConfig's hidden_act='quick_gelu' and layer_norm_eps=1e-5 (config.json)."])


def _model(converted: dict[str, torch.Tensor], variant: str, num_heads: int, block_size: int, depth: int,
           embed_dim: int) -> dict[str, Any]:
    """The ``TimmViT`` config of the converted tensors."""
    head: dict[str, Any] = {}
    if 'head.fc1.weight' in converted:
        classes = converted['head.fc2.weight'].shape[0]
        head = dict(head_hidden_dim=converted['head.fc1.weight'].shape[0], head_act='relu')
    else:
        classes = converted['head.weight'].shape[0] if 'head.weight' in converted else 0
    arguments = vit_arguments(embed_dim, depth, num_heads, converted['patch_embed.proj.weight'].shape[-1],
                              converted['blocks.0.mlp.fc1.weight'].shape[0] / embed_dim, classes)
    return dict(type='TimmViT', **arguments, pre_norm=True, act_layer='quick_gelu', norm_eps=1e-5, **head,
                encoding=dict(type='ComRoPE', variant=variant, block_size=block_size))


COMROPE = register_converter(CheckpointConverter(
    name='comrope',
    convert=convert_comrope,
    summary='ComRoPE-AP/LD CLIP-style ViTs (Longin-Yu/ComRoPE, CVPR 2025; transformers state dicts) -> TimmViT with '
            'the ComRoPE encoding',
    signature=(r'^vision_model\.encoder\.layers\.\d+\.self_attn\.freqs$',
               r'^vision_model\.embeddings\.class_embedding$', r'^vision_model\.pre_layrnorm\.'),
    keys_described='keys (transformers CLIP vision names vision_model.* with encoder.layers.N.self_attn.freqs)',
    released='none: Longin-Yu/ComRoPE releases code only (no checkpoint, no training script); the converter reads '
             'the state dicts its transformers models save',
    license='none stated (Longin-Yu/ComRoPE has no LICENSE file)',
))
