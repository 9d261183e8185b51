"""PETR (Liu et al., ECCV 2022) and 3DPPE (Shu et al., ICCV 2023) multi-view 3D detection: the detector, its
decoder, box code, set loss and the converter of released checkpoints."""
from vispe.models.petr.box_coder import decode_boxes, encode_boxes, nms_free_decode
from vispe.models.petr.convert import CheckpointFamilyError, convert_petr_state_dict
from vispe.models.petr.criterion import HungarianMatcher3D, PETRCriterion
from vispe.models.petr.denoising import QueryDenoising, make_denoising_queries
from vispe.models.petr.detector import PETRDetector
from vispe.models.petr.transformer import PETRDecoder

__all__ = ['CheckpointFamilyError', 'HungarianMatcher3D', 'PETRCriterion', 'PETRDecoder', 'PETRDetector',
           'QueryDenoising', 'convert_petr_state_dict',
           'decode_boxes', 'encode_boxes', 'make_denoising_queries', 'nms_free_decode']
