"""DETR (Carion et al., ECCV 2020) with any vispe 2D encoding in its encoder."""
from vispe.models.detr.backbone import TimmFeatures
from vispe.models.detr.criterion import SetCriterion
from vispe.models.detr.detector import DETR
from vispe.models.detr.matcher import HungarianMatcher
from vispe.models.detr.transformer import DecoderLayer, DETRDecoder, DETREncoder

__all__ = ['DETR', 'DETRDecoder', 'DETREncoder', 'DecoderLayer', 'HungarianMatcher', 'SetCriterion',
           'TimmFeatures']
