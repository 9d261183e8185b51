"""vispe ViTs in timm's model registry: ``timm.create_model('vispe_vit', base_model=..., encoding=...)``, and timm's
sharing path (``save_for_hf`` / ``push_to_hf_hub`` -> ``create_model('local-dir:...' or 'hf-hub:...')``) that gives
the same model back.

``import vispe`` registers the architecture ``vispe_vit``. Its arguments are :func:`vispe.create_vit`'s: a timm
``VisionTransformer`` name as ``base_model``, the ``encoding`` config, timm's ViT arguments. A vispe ViT's
``pretrained_cfg`` names ``vispe_vit`` (:mod:`vispe.models.timm_cfg`), so ``save_for_hf`` writes ``config.json`` with
``architecture: vispe_vit`` and these arguments, and timm's ``local-dir:``/``hf-hub:`` loading calls ``vispe_vit``
with them. Weights load through vispe's reader (:mod:`vispe.models.pretrained`), strictly.

    >>> import timm, vispe
    >>> model = timm.create_model('vispe_vit', base_model='vit_small_patch16_224',
    ...                           encoding=dict(type='RoPEMixed'), num_classes=10)
    >>> timm.models.save_for_hf(model, 'my-model')
    >>> again = timm.create_model('local-dir:my-model', pretrained=True)   # the same model and logits
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from timm.models import generate_default_cfgs, register_model

from vispe.models.pretrained import HF_PREFIX, load_pretrained
from vispe.models.timm_cfg import ARCHITECTURE, VISPE_KEYS, vispe_pretrained_cfg
from vispe.models.vit import VisionTransformer
from vispe.models.vit_factory import create_vit
from vispe.models.vit_features import feature_extractor

__all__ = ['vispe_vit']

# vispe_vit has no weights of its own: its pretrained_cfg is its base architecture's input config, and weights come
# from a file, a save_for_hf folder or a hub id (or, with pretrained=True alone, the base architecture's timm weights).
default_cfgs = generate_default_cfgs({ARCHITECTURE: dict(architecture=ARCHITECTURE)})


def weights_of(cfg: Mapping[str, Any]) -> str | None:
    """The weights a pretrained_cfg points at, as a ``pretrained=`` value: its ``file`` or ``hf-hub:`` id."""
    if cfg.get('file'):
        return os.fspath(cfg['file'])
    if cfg.get('hf_hub_id'):
        return HF_PREFIX + str(cfg['hf_hub_id'])
    if cfg.get('url'):
        raise ValueError(f'vispe_vit loads weights from a file, a save_for_hf folder or a Hugging Face hub id, not '
                         f'from url {cfg["url"]!r}: download it and pass pretrained_cfg_overlay=dict(file=PATH).')
    return None


@register_model
def vispe_vit(pretrained: bool = False, base_model: str | None = None, encoding: Any = None,
              pretrained_cfg: Mapping[str, Any] | str | None = None,
              pretrained_cfg_overlay: Mapping[str, Any] | None = None, cache_dir: str | os.PathLike | None = None,
              pretrained_model_args: Mapping[str, Any] | None = None, **kwargs: Any) -> VisionTransformer:
    """A timm ``VisionTransformer`` architecture (``base_model``) with a vispe ``encoding``: :func:`vispe.create_vit`
    as a timm architecture.

    Args:
        pretrained: load the weights ``pretrained_cfg`` (or ``pretrained_cfg_overlay``) points at (``file`` or
            ``hf_hub_id``: what timm's ``local-dir:``/``hf-hub:`` loading sets); without one, timm's weights of
            ``base_model``. A weights file with another head than ``num_classes`` keeps the new head.
        base_model: a timm ``VisionTransformer`` name (taken from ``pretrained_cfg['base_model']`` when omitted).
        encoding: vispe encoding config (or ``pretrained_cfg['encoding']``); default ``LearnedAPE``.
        pretrained_cfg, pretrained_cfg_overlay, cache_dir, pretrained_model_args: timm's factory arguments.
        **kwargs: :func:`vispe.create_vit`'s (timm's ViT arguments, ``nonfinite_inputs``, ``extra_geometry``).
    """
    if isinstance(pretrained_cfg, str):
        raise ValueError(f'{ARCHITECTURE} has no pretrained tag {pretrained_cfg!r}: vispe models come with weights '
                         f"through 'local-dir:PATH' or 'hf-hub:org/name' names, "
                         f'pretrained_cfg_overlay=dict(file=PATH), '
                         f'or vispe.create_vit(..., pretrained=PATH).')
    cfg = {**(pretrained_cfg or {}), **(pretrained_cfg_overlay or {})}
    base_model = base_model or cfg.get('base_model')
    if not base_model:
        raise TypeError(f"{ARCHITECTURE} needs base_model=, a timm VisionTransformer name such as "
                        f"'vit_small_patch16_224' (the architecture the encoding goes into).")
    encoding = encoding if encoding is not None else cfg.get('encoding')
    weights = weights_of(cfg) if pretrained else None
    # the weights load into the whole model: a feature extractor wraps it afterwards
    feature_cfg = {key: kwargs.pop(key) for key in ('out_indices', 'feature_cls') if key in kwargs}
    features_only = kwargs.pop('features_only', False)
    model = create_vit(base_model, encoding, pretrained=bool(pretrained) and weights is None, **kwargs)
    if weights is not None:
        trained_classes = cfg.get('num_classes')
        load_pretrained(model, weights, new_classifier=trained_classes is not None
                        and trained_classes != model.num_classes, cache_dir=cache_dir)
    if cfg:
        source = {key: value for key, value in cfg.items() if key not in VISPE_KEYS}
        note = f'weights: {weights}' if weights else None
        model.pretrained_cfg = vispe_pretrained_cfg(source, base_model, model.pretrained_cfg['encoding'], note,
                                                    keep_weights=True)
        model.default_cfg = model.pretrained_cfg
    model.pretrained_model_args = dict(pretrained_model_args or {})
    return feature_extractor(model, **feature_cfg) if features_only else model

