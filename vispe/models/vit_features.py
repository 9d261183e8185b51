"""timm's ``features_only`` wrapper for vispe ViTs, and the private timm names vispe relies on, in one place.

timm exposes no public name for its ViT feature getter (``FeatureGetterNet``), the normalisation of
``forward_intermediates``' indices (``feature_take_indices``) or the pretrained config of a feature extractor
(``pretrained_cfg_for_features``). vispe imports them here only; pyproject.toml pins timm below its next minor
version, and tests/models/test_timm_private_names.py fails when one of them moves or changes its signature.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from timm.models._builder import pretrained_cfg_for_features
from timm.models._features import FeatureGetterNet, feature_take_indices
from torch import nn

if TYPE_CHECKING:
    from vispe.models.vit import VisionTransformer

__all__ = ['FeatureGetterNet', 'feature_extractor', 'feature_take_indices', 'pretrained_cfg_for_features']


def feature_extractor(model: VisionTransformer, out_indices: int | Sequence[int] = 3,
                      feature_cls: str = 'getter') -> nn.Module:
    """timm's ``features_only`` wrapper of a ViT: ``FeatureGetterNet`` over ``forward_intermediates`` (as timm wraps
    its own ViTs), returning the feature maps (B, C, h, w) of the blocks ``out_indices`` (an int n: the last n).

    Raises:
        ValueError: a ``feature_cls`` other than timm's ViT extractor ('getter').
    """
    if feature_cls != 'getter':
        raise ValueError(f"feature_cls={feature_cls!r}: vispe ViTs give features as timm's ViTs do, through "
                         f"forward_intermediates (feature_cls='getter', the default); for other layers use "
                         f"timm.models.create_feature_extractor (torch.fx) on the model built without features_only.")
    extractor = FeatureGetterNet(model, out_indices=out_indices)
    extractor.pretrained_cfg = pretrained_cfg_for_features(model.pretrained_cfg)
    extractor.default_cfg = extractor.pretrained_cfg
    return extractor
