"""The nuScenes devkit's detection config for mv-scenes: ``detection_cvpr_2019`` restricted to its classes.

The devkit averages AP over ``config.class_names``; with all ten nuScenes classes the five classes
mv-scenes lacks count as AP 0, so perfect predictions would score mAP 0.5. Restricting ``class_names``
(its constructor insists on all ten in ``class_range``) keeps every other setting of the official config:
centre-distance thresholds 0.5/1/2/4 m, tp threshold 2 m, min recall/precision 0.1, class ranges, 500
boxes per sample, mean-AP weight 5. A class without ground truth in the evaluated split also scores AP 0.
"""
from __future__ import annotations

from typing import Any, Sequence

from vispe.datasets.mv_scenes.meshes import CLASSES

__all__ = ['detection_config']


def detection_config(classes: Sequence[str] = CLASSES, name: str = 'detection_cvpr_2019') -> Any:
    """The devkit's ``DetectionConfig`` ``name`` with only ``classes`` (needs nuscenes-devkit)."""
    from nuscenes.eval.common.config import config_factory

    config = config_factory(name)
    unknown = sorted(set(classes) - set(config.class_range))
    if unknown:
        raise ValueError(f'classes {unknown} are not nuScenes detection names; use names of '
                         f'{sorted(config.class_range)}')
    config.class_names = list(classes)
    return config
