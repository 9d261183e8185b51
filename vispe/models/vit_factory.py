"""Building vispe ViTs from timm's architectures by name: ``create_vit`` (the ``TimmViT`` config type) and timm's
``features_only`` wrapper.

Every vispe ViT is a timm ``VisionTransformer`` converted by :func:`vispe.models.vit.retrofit`: ``create_vit`` builds
timm's architecture (and its pretrained weights) with ``timm.create_model`` and converts it.
"""
from __future__ import annotations

import difflib
import functools
import os
from typing import Any, Sequence

import timm
from timm.layers import LayerNorm, Mlp, get_act_layer
from torch import nn

from vispe.checkpoint import load_weights
from vispe.encodings.builder import EncodingConfig
from vispe.geometry import to_2tuple
from vispe.models.inputs import check_nonfinite_option
from vispe.models.vit import DEFAULT_ENCODING, VisionTransformer, retrofit, timm_arguments
from vispe.models.pretrained import load_pretrained
from vispe.models.timm_cfg import describe_for_timm
from vispe.models.timm_rope import check_vision_transformer_name, timm_rope_equivalent
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
        pretrained: bool | str | os.PathLike = False,
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
    timm's ports of naver-ai/rope-vit (``vit_small_patch16_rope_224``, ``..._rope_mixed_ape_224`` ...) are built as
    the vispe ViT they are (:mod:`vispe.models.timm_rope`), their timm weights included.

    The model's ``pretrained_cfg`` names vispe's timm architecture ``vispe_vit`` with ``base_model`` and the
    ``encoding`` config, and no weights the model does not have, so ``timm.models.save_for_hf`` and
    ``timm.create_model('local-dir:...' or 'hf-hub:...', pretrained=True)`` rebuild it (:mod:`vispe.models.timm_hub`).

    Args:
        model_name: a timm ``VisionTransformer`` name, e.g. ``'vit_small_patch16_224'``.
        encoding: config, instance or list; default ``LearnedAPE``.
        pretrained: ``True``: timm's pretrained weights of ``model_name`` (needs them cached or a hub connection);
            a string: a checkpoint file, a ``save_for_hf`` folder, ``'hf-hub:org/name'`` or a vispe zoo card, read
            by vispe's safe reader and loaded strictly (:mod:`vispe.models.pretrained`; with ``num_classes`` given
            and another head in the weights, the head starts new).
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
    requested_name, timm_weights = model_name, pretrained is True
    rope = timm_rope_equivalent(model_name)
    if rope is not None:
        if encoding is not None and encoding != rope.encoding:
            raise ValueError(f'{model_name} is timm\'s port of a rope-vit model: {rope.base} with encoding '
                             f'{rope.encoding}, whose weights carry these options. Leave encoding out to build it, '
                             f'or build {rope.base!r} with your encoding.')
        model_name, encoding, kwargs = rope.base, rope.encoding, {**rope.timm_kwargs, **kwargs}
    encoding = DEFAULT_ENCODING if encoding is None else encoding
    _check_architecture_overrides(kwargs)
    check_nonfinite_option(nonfinite_inputs)
    if not isinstance(pretrained, (bool, str, os.PathLike)):
        raise TypeError(f'pretrained must be True/False, a checkpoint path, a save_for_hf folder, an '
                        f"'hf-hub:org/name' id or a vispe zoo card; got {type(pretrained).__name__}.")
    architecture = dict(kwargs)  # what rebuilds the model (timm's _model_args), before norm_eps becomes a layer
    if norm_eps is not None:
        if 'norm_layer' in kwargs:
            raise ValueError(f'create_vit: give norm_eps ({norm_eps}) or norm_layer ({kwargs["norm_layer"]!r}), not '
                             f'both; norm_eps sets the eps of timm\'s LayerNorm.')
        if not norm_eps > 0:
            raise ValueError(f'create_vit: norm_eps must be > 0 (e.g. 1e-5 or 1e-6); got {norm_eps!r}.')
        kwargs['norm_layer'] = functools.partial(LayerNorm, eps=float(norm_eps))
        architecture['norm_eps'] = norm_eps
    if head_hidden_dim is not None:
        architecture.update(head_hidden_dim=head_hidden_dim, head_act=head_act)
    if not timm.is_model(model_name):
        close = difflib.get_close_matches(model_name, timm.list_models('vit_*'), n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ''
        raise ValueError(f'Unknown timm model {model_name!r}.{hint} List them with timm.list_models("vit_*").')
    check_vision_transformer_name(model_name)
    # timm's weights need the architecture's own pos_embed to load; the conversion then keeps or drops it
    base_weights = timm_weights and rope is None
    timm_kwargs = timm_arguments(encoding, kwargs, keep_pos_embed=base_weights)
    features_only = timm_kwargs.pop('features_only', False)
    feature_cfg = {key: timm_kwargs.pop(key) for key in ('out_indices', 'feature_cls') if key in timm_kwargs}
    model = retrofit(timm.create_model(model_name, pretrained=base_weights, **timm_kwargs), encoding,
                     nonfinite_inputs=nonfinite_inputs, extra_geometry=extra_geometry)
    if head_hidden_dim is not None:
        model.head = mlp_head(model, head_hidden_dim, head_act)
    weights_note = None
    if base_weights:
        weights_note = f'weights: timm {describe_weights(model.pretrained_cfg)}, converted to this encoding'
    elif timm_weights:
        weights_note = f'weights: timm {load_timm_rope_weights(model, requested_name, kwargs)}'
    elif pretrained:
        weights_note = f'weights: {os.fspath(pretrained)}'
    describe_for_timm(model, model_name, encoding, architecture, weights_note, nonfinite_inputs, extra_geometry)
    if pretrained and not timm_weights:  # after describe_for_timm: a converted file is checked against its arguments
        load_pretrained(model, pretrained, new_classifier='num_classes' in kwargs)
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


def describe_weights(pretrained_cfg: dict[str, Any]) -> str:
    """timm's name of the weights a ``pretrained_cfg`` points at (``architecture.tag (hub id or url)``)."""
    name = '.'.join(part for part in (pretrained_cfg.get('architecture'), pretrained_cfg.get('tag')) if part)
    where = pretrained_cfg.get('hf_hub_id') or pretrained_cfg.get('url') or pretrained_cfg.get('file')
    return f'{name} ({where})' if where else name


def load_timm_rope_weights(model: VisionTransformer, timm_name: str, kwargs: dict[str, Any]) -> str:
    """Load the timm weights of rope-vit port ``timm_name`` (timm's Eva, built with the user's ``kwargs``) into its
    vispe form ``model``; returns their description."""
    eva_kwargs = {key: value for key, value in kwargs.items() if key not in ('features_only', 'out_indices',
                                                                             'feature_cls')}
    eva = timm.create_model(timm_name, pretrained=True, dynamic_img_size=True, **eva_kwargs)
    # the weights of the very architecture timm built: nothing to check their encoding against
    load_weights(model, dict(eva.state_dict()), {}, f'timm {timm_name}', check_encoding=False)
    return describe_weights(eva.pretrained_cfg)


MODELS.register_module(name='TimmViT', module=create_vit)
