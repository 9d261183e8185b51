"""LookHere (Fuller et al., "LookHere: Vision Transformers with Directed Attention Generalize and Extrapolate",
NeurIPS 2024; GreenCUBIC/lookhere) as a registered family: its DeiT-III ViTs -> ``TimmViT`` with the ``LookHere``
encoding.

The released files (``LH_180_weights_and_config.pth``, ``LH_90_...``, ``LH_45_...`` on huggingface.co/antofuller/
LookHere, ViT-B/16 trained 150 epochs on ImageNet-1k) are ``{'weights': state_dict, 'config': lh_config}``, the
README's ``LookHere(lh_config=checkpoint["config"])`` / ``load_state_dict(checkpoint["weights"])``. The attention
directions are in no tensor (the bias maps are plain attributes, rebuilt per grid), so the converter reads
``lh_config`` from the file (:attr:`CheckpointConverter.file_entries`): ``head_directions`` (one string, or one
per layer, which must then be equal: vispe's ``LookHere`` takes one), ``global_slope``, ``layer_slopes``,
``distance`` and ``fill_with`` (the reference's defaults 'linear' and 'inf' when absent), and ``num_heads`` when the
config has it; else the head count follows the ViT convention of 64 channels per head (ViT-B: 12), since no tensor
shape gives it. A file without the config is refused, naming what to add.

Every tensor maps one to one: the reference's model (``vision_transformer.py``, DeiT-III's ``models_v2``) has
timm's names (``patch_embed.proj``, ``cls_token``, ``blocks.N.{norm1,attn.qkv,attn.proj,ls1.gamma,norm2,mlp.fc1,
mlp.fc2,ls2.gamma}``, ``norm``), no ``pos_embed`` (deleted) and a two-layer head ``head.fc1`` -> tanh ->
``head.fc2``. The vispe model takes ``norm_eps=1e-5`` (``torch.nn.LayerNorm``'s, not timm's 1e-6),
``head_hidden_dim`` with ``head_act='tanh'``, and ``reference_rounding=True``: the reference rounds its bias maps to
bfloat16 (computed in float64) and vispe does the same, so the logits agree to float32 rounding (the golden test:
<= 1e-5). Nothing is unmapped; a key outside this layout is refused (a ``pos_embed`` means a plain ViT, not
LookHere).
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from vispe.converters.deit import VIT_NAMES, heads_of_width
from vispe.converters.registry import (CheckpointConverter, CheckpointFamilyError, Conversion, StateDict,
                                       UnsupportedCheckpointError, register_converter)

# The keys of the reference's model (DeiT-III names, as timm's).
KEY_PATTERNS = (r'cls_token', r'patch_embed\.proj\.(weight|bias)', r'norm\.(weight|bias)',
                r'head\.fc[12]\.(weight|bias)', r'blocks\.\d+\.ls[12]\.gamma',
                r'blocks\.\d+\.(norm[12]|attn\.qkv|attn\.proj|mlp\.fc[12])\.(weight|bias)')
# What the reference's lh_config may hold (create_lh_bias_tensor reads these; distance and fill_with are optional).
CONFIG_KEYS = ('head_directions', 'global_slope', 'layer_slopes', 'distance', 'fill_with')
# The ViT convention the released ViT-B/16 follows (768 channels, 12 heads).
CONFIG_HINT = ("Save the file as the released ones are: torch.save({'weights': model.state_dict(), 'config': "
               "lh_config}, path), with the lh_config the model was built with (LookHere(lh_config=...)), e.g. "
               "{'head_directions': 'halves', 'global_slope': 1.0, 'layer_slopes': [1.5, 0.5]}.")


def vit_arguments(embed_dim: int, depth: int, num_heads: int, patch_size: int, mlp_ratio: float,
                  num_classes: int) -> dict[str, Any]:
    """The ``TimmViT`` architecture arguments of a ViT of these sizes: timm's ``vit_<size>_patch16_224`` of the
    same width where there is one (else ``vit_base_patch16_224``), every size explicit."""
    return dict(model_name=VIT_NAMES.get(embed_dim, 'vit_base_patch16_224'), num_classes=num_classes,
                embed_dim=embed_dim, depth=depth, num_heads=num_heads, patch_size=patch_size, mlp_ratio=mlp_ratio)


def _directions(value: Any, depth: int, source: str) -> str:
    """The one directions string of ``head_directions`` (a string, or one per layer, all equal)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, str) for item in value):
        if len(value) != depth:
            raise UnsupportedCheckpointError(f'{source}: config head_directions has {len(value)} entries for a model '
                                             f'of depth {depth}; the reference needs one per layer.')
        if len(set(value)) == 1:
            return value[0]
        raise UnsupportedCheckpointError(f'{source}: config head_directions differs across layers ({list(value)}); '
                                         f"vispe's LookHere uses one directions string in every layer, so this model "
                                         f'has no exact vispe counterpart.')
    raise UnsupportedCheckpointError(f'{source}: config head_directions must be a string such as "halves" (or one '
                                     f'per layer); got {value!r}.')


def encoding_config(config: Mapping[str, Any], depth: int, num_heads: int, source: str) -> dict[str, Any]:
    """vispe's ``LookHere`` options equal to the reference's ``lh_config``."""
    from vispe.encodings.lookhere import head_layout
    missing = [key for key in ('head_directions', 'global_slope', 'layer_slopes') if key not in config]
    if missing:
        raise UnsupportedCheckpointError(f'{source}: its config {sorted(config)} lacks {missing}. {CONFIG_HINT}')
    directions = _directions(config['head_directions'], depth, source)
    try:
        head_layout(directions, num_heads)
    except ValueError as error:
        raise UnsupportedCheckpointError(f'{source}: config head_directions={directions!r} with {num_heads} heads: '
                                         f'{error}') from None
    slopes = config['layer_slopes']
    if not isinstance(slopes, (list, tuple)) or len(slopes) != 2:
        raise UnsupportedCheckpointError(f'{source}: config layer_slopes must be (first, last); got {slopes!r}.')
    return dict(type='LookHere', directions=directions, global_slope=float(config['global_slope']),
                layer_slopes=[float(value) for value in slopes], distance=str(config.get('distance', 'linear')),
                fill_with=str(config.get('fill_with', 'inf')), reference_rounding=True)


def _shape(state_dict: StateDict, key: str, source: str) -> Sequence[int]:
    if key not in state_dict:
        raise CheckpointFamilyError(f'{source} has no {key}, which every LookHere model has (keys: '
                                    f'{", ".join(list(state_dict)[:6])}, ...).')
    return tuple(state_dict[key].shape)


def convert_lookhere(state_dict: StateDict, source: str = 'the checkpoint',
                     config: Mapping[str, Any] | None = None) -> Conversion:
    """LookHere's state dict and ``lh_config`` (the file's ``config``) -> the ``TimmViT`` + ``LookHere`` model that
    computes the same logits (see the module docstring)."""
    if 'pos_embed' in state_dict:
        raise CheckpointFamilyError(f'{source} has a pos_embed {tuple(state_dict["pos_embed"].shape)}: LookHere '
                                    f'models delete theirs, so this is a plain ViT. Load it with create_vit(..., '
                                    f'encoding=dict(type="LearnedAPE"), pretrained=...) instead.')
    foreign = [key for key in state_dict if not any(re.fullmatch(pattern, key) for pattern in KEY_PATTERNS)]
    if foreign:
        raise CheckpointFamilyError(f'{source} has keys outside the LookHere ViT layout: {foreign[:8]}'
                                    f'{" ..." if len(foreign) > 8 else ""}.')
    embed_dim = _shape(state_dict, 'cls_token', source)[-1]
    patch = _shape(state_dict, 'patch_embed.proj.weight', source)
    depth = len({int(key.split('.')[1]) for key in state_dict if key.startswith('blocks.')})
    hidden = _shape(state_dict, 'blocks.0.mlp.fc1.weight', source)[0]
    head_hidden, classes = _shape(state_dict, 'head.fc1.weight', source)[0], _shape(state_dict, 'head.fc2.weight',
                                                                                     source)[0]
    if patch[-1] != patch[-2]:
        raise UnsupportedCheckpointError(f'{source}: patch_embed.proj.weight {patch} has non-square patches.')
    if config is None:
        raise UnsupportedCheckpointError(f"{source} has no 'config' entry beside its weights: LookHere's attention "
                                         f'directions and slopes are in no tensor. {CONFIG_HINT}')
    if not isinstance(config, Mapping):
        raise UnsupportedCheckpointError(f"{source}: its 'config' entry is a {type(config).__name__}, not the "
                                         f'lh_config dict. {CONFIG_HINT}')
    num_heads = config.get('num_heads')
    if num_heads is None:
        num_heads = heads_of_width(embed_dim, source, "Its config has no num_heads: add 'num_heads' to it.")
    encoding = encoding_config(config, depth, int(num_heads), source)
    model = dict(type='TimmViT', **vit_arguments(embed_dim, depth, int(num_heads), patch[-1], hidden / embed_dim,
                                                 classes),
                 init_values=1e-4, norm_eps=1e-5, head_hidden_dim=head_hidden, head_act='tanh', encoding=encoding)
    ignored = sorted(set(config) - set(CONFIG_KEYS) - {'num_heads'})
    notes = [f"LookHere options from the file's config: directions={encoding['directions']!r}, global_slope="
             f"{encoding['global_slope']}, layer_slopes={encoding['layer_slopes']}, distance={encoding['distance']!r}, "
             f"fill_with={encoding['fill_with']!r}; {num_heads} heads; biases rounded to bfloat16 as the reference's "
             f'(reference_rounding=True).']
    if ignored:
        notes.append(f'config entries that set no LookHere option (training settings): {", ".join(ignored)}.')
    return Conversion(dict(state_dict), model=model, notes=notes)


LOOKHERE = register_converter(CheckpointConverter(
    name='lookhere',
    convert=convert_lookhere,
    summary='LookHere DeiT-III ViTs (GreenCUBIC/lookhere, NeurIPS 2024) -> TimmViT with the LookHere encoding, its '
            "directions and slopes read from the file's config",
    signature=(r'^blocks\.\d+\.ls1\.gamma$', r'^head\.fc1\.weight$', r'^head\.fc2\.weight$'),
    keys_described='keys (timm/DeiT-III names with blocks.N.ls1.gamma, a two-layer head head.fc1/head.fc2, no '
                   'pos_embed)',
    released='huggingface.co/antofuller/LookHere: LH_180_weights_and_config.pth, LH_90_weights_and_config.pth, '
             'LH_45_weights_and_config.pth (ViT-B/16, ImageNet-1k, 150 epochs), linked from the README of '
             'GreenCUBIC/lookhere',
    license='MIT (the LICENSE of GreenCUBIC/lookhere; the weights carry no other license)',
    file_entries=('config',),
))
