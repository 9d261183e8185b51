"""PETR / 3DPPE (megvii-research/PETR, drilistbox/3DPPE; mmdet3d 0.17 plugins) as a registered family; the mapping
itself is :func:`vispe.models.petr.convert.convert_petr_state_dict`."""
from __future__ import annotations

from vispe.converters.registry import CheckpointConverter, register_converter
from vispe.models.petr.convert import convert_petr_state_dict

PETR = register_converter(CheckpointConverter(
    name='petr',
    convert=convert_petr_state_dict,
    summary='PETR / 3DPPE multi-view detectors (megvii-research/PETR, drilistbox/3DPPE) -> PETRDetector; the FPN '
            'neck and DCN offsets have no vispe module and are listed',
    signature=(r'^pts_bbox_head\.', r'^img_backbone\.', r'transformer\.decoder\.layers\.\d+\.attentions\.'),
    keys_described='keys (img_backbone.*, pts_bbox_head.* with mmcv decoder layers)',
    released='the README tables of megvii-research/PETR (Google Drive) and drilistbox/3DPPE',
    license='PETR: Apache-2.0 (the LICENSE of megvii-research/PETR); 3DPPE: none stated (no LICENSE file in '
            'drilistbox/3DPPE)',
))
