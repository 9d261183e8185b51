"""Building vispe ViTs from timm's architectures by name: ``create_vit`` (the ``TimmViT`` config type) and timm's
``features_only`` wrapper.

Every vispe ViT is a timm ``VisionTransformer`` converted by :func:`vispe.models.vit.retrofit`: ``create_vit`` builds
timm's architecture (and its pretrained weights) with ``timm.create_model`` and converts it.
"""
from __future__ import annotations

import difflib
import functools
from typing import Any, Sequence

import timm
from timm.layers import LayerNorm, Mlp, get_act_layer
from torch import nn

from vispe.encodings.builder import EncodingConfig
from vispe.geometry import to_2tuple
from vispe.models.inputs import check_nonfinite_option
from vispe.models.vit import DEFAULT_ENCODING, VisionTransformer, retrofit, timm_arguments
from vispe.models.vit_features import feature_extractor
from vispe.registry import MODELS

__all__ = ['create_vit']


def _check_architecture_overrides(kwargs: dict[str, Any]) -> None:
    """Sizes given to ``create_vit`` that timm would turn into a division by zero or an empty model."""
    for name in ('patch_size', 'img_size', 'depth', 'num_heads', 'embed_dim'):
        value = kwargs.get(name)
        values = value if isinstance(value, (tuple, list)) else [value]
        if value is not None and not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
            raise ValueError(f'create_vit: {name} must be a whole number of at least 1 (or a pair of them for sizes); '
                             f'got {value!r}.')
    embed_dim, num_heads = kwargs.get('embed_dim'), kwargs.get('num_heads')
    if embed_dim is not None and num_heads is not None and embed_dim % num_heads:
        nearest = min((d for d in range(1, embed_dim + 1) if embed_dim % d == 0), key=lambda d: abs(d - num_heads))
        raise ValueError(f'create_vit: embed_dim {embed_dim} is not divisible by num_heads {num_heads}; choose a '
                         f'head count that divides it (e.g. {nearest}).')
    image, patch = kwargs.get('img_size'), kwargs.get('patch_size')
    if image is not None and patch is not None:
        image, patch = to_2tuple(image), to_2tuple(patch)
        if image[0] < patch[0] or image[1] < patch[1]:
            raise ValueError(f'create_vit: img_size {image} is smaller than one patch {patch}; the training size '
                             f'must hold at least one patch per side.')


def create_vit(
        model_name: str,
        encoding: EncodingConfig | None = None,
        pretrained: bool = False,
        nonfinite_inputs: str = 'raise',
        extra_geometry: Sequence[str] = (),
        norm_eps: float | None = None,
        head_hidden_dim: int | None = None,
        head_act: str = 'tanh',
        **kwargs: Any,
) -> VisionTransformer:
    """Build a timm ViT architecture by name with any vispe encoding.

    The architecture (embed_dim, depth, heads, patch size, ...) comes from timm's own model
    definition; timm's keyword arguments (``num_classes``, ``img_size``, ``drop_path_rate``,
    ``class_token``, ``reg_tokens``, ``global_pool``, ``pretrained_cfg_overlay`` ...) pass through.
    With ``dict(type='LearnedAPE')`` the model is timm's ViT: the same weights give the same logits.

    Args:
        model_name: a timm ``VisionTransformer`` name, e.g. ``'vit_small_patch16_224'``.
        encoding: config, instance or list; default ``LearnedAPE``.
        pretrained: load timm's pretrained weights (needs the weights locally or a hub connection).
        nonfinite_inputs: 'raise', 'warn' or 'ignore' for NaN/inf pixels (see :class:`VisionTransformer`);
            vispe's option, not passed to timm.
        extra_geometry: what a host gives the positions beyond the patch grid (see :class:`VisionTransformer`).
        norm_eps: the eps of every LayerNorm (timm's ViTs use 1e-6; models built on ``torch.nn.LayerNorm`` or
            HuggingFace's CLIP use 1e-5, which released weights need to give their authors' outputs).
        head_hidden_dim: a two-layer head ``fc2(act(fc1(x)))`` with this hidden width instead of one linear layer
            (timm's ``Mlp``: keys ``head.fc1.*``, ``head.fc2.*``), as LookHere's DeiT-III models have it.
        head_act: the activation of that head: a timm activation name ('tanh' as LookHere, 'relu', ...).

    Example:
        >>> vit = create_vit('vit_small_patch16_224', encoding=dict(type='SinCos2D'), num_classes=10)
        >>> vit(torch.randn(2, 3, 384, 320)).shape
        torch.Size([2, 10])
    """
    encoding = DEFAULT_ENCODING if encoding is None else encoding
    _check_architecture_overrides(kwargs)
    check_nonfinite_option(nonfinite_inputs)
    if norm_eps is not None:
        if 'norm_layer' in kwargs:
            raise ValueError(f'create_vit: give norm_eps ({norm_eps}) or norm_layer ({kwargs["norm_layer"]!r}), not '
                             f'both; norm_eps sets the eps of timm\'s LayerNorm.')
        if not norm_eps > 0:
            raise ValueError(f'create_vit: norm_eps must be > 0 (e.g. 1e-5 or 1e-6); got {norm_eps!r}.')
        kwargs['norm_layer'] = functools.partial(LayerNorm, eps=float(norm_eps))
    # pretrained weights need the architecture's own pos_embed to load; the conversion then keeps or drops it
    timm_kwargs = timm_arguments(encoding, kwargs, keep_pos_embed=pretrained)
    if not timm.is_model(model_name):
        close = difflib.get_close_matches(model_name, timm.list_models('vit_*'), n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ''
        raise ValueError(f'Unknown timm model {model_name!r}.{hint} List them with timm.list_models("vit_*").')
    features_only = timm_kwargs.pop('features_only', False)
    feature_cfg = {key: timm_kwargs.pop(key) for key in ('out_indices', 'feature_cls') if key in timm_kwargs}
    model = retrofit(timm.create_model(model_name, pretrained=pretrained, **timm_kwargs), encoding,
                     nonfinite_inputs=nonfinite_inputs, extra_geometry=extra_geometry)
    if head_hidden_dim is not None:
        model.head = mlp_head(model, head_hidden_dim, head_act)
    return feature_extractor(model, **feature_cfg) if features_only else model


def mlp_head(model: VisionTransformer, hidden_dim: int, act: str) -> Mlp:
    """A two-layer classifier ``fc2(act(fc1(x)))`` for ``model``'s features and classes."""
    if isinstance(hidden_dim, bool) or not isinstance(hidden_dim, int) or hidden_dim < 1:
        raise ValueError(f'create_vit: head_hidden_dim must be a whole number of at least 1; got {hidden_dim!r}.')
    if model.num_classes < 1:
        raise ValueError(f'create_vit: head_hidden_dim={hidden_dim} needs num_classes >= 1 (a head to put it in); '
                         f'got num_classes={model.num_classes}.')
    try:
        act_layer = get_act_layer(act)
    except (KeyError, ValueError, TypeError):
        act_layer = None
    if act_layer is None:
        raise ValueError(f'create_vit: head_act {act!r} is not a timm activation; use e.g. "tanh", "relu" or "gelu".')
    return Mlp(model.head_hidden_size, hidden_dim, model.num_classes, act_layer=act_layer)


MODELS.register_module(name='TimmViT', module=create_vit)
