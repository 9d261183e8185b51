"""A V-DETR-style point-cloud 3D detector (Shen et al., ICLR 2024, on 3DETR, Misra et al., ICCV 2021) with any point
encoding in its decoder's cross-attention."""
from vispe.models.vdetr.criterion import BoxSetCriterion, aligned_giou3d, points_in_boxes
from vispe.models.vdetr.detector import VDETR
from vispe.models.vdetr.head import VDETRHead
from vispe.models.vdetr.pointnet2 import PointNet2Backbone, PointSetAbstraction
from vispe.models.vdetr.transformer import BoxRefinementDecoder, PointDecoderLayer, PointEncoderLayer
from vispe.models.vdetr.yaw_bins import decode_yaw, yaw_bin_targets

__all__ = ['BoxRefinementDecoder', 'BoxSetCriterion', 'PointDecoderLayer', 'PointEncoderLayer', 'PointNet2Backbone',
           'PointSetAbstraction', 'VDETR', 'VDETRHead', 'aligned_giou3d', 'decode_yaw', 'points_in_boxes',
           'yaw_bin_targets']
