"""Encodings, one file per family, each registered in :data:`vispe.registry.ENCODINGS`."""
from vispe.encodings.alibi2d import ALiBi2D
from vispe.encodings.base import HOOK_NAMES, AbsoluteEncoding, PositionEncoding, add_to_positioned
from vispe.encodings.hosts import (EncodingHostError, Host, check_encoding_fits, list_hosts, register_host,
                                  require_position_embedding)
from vispe.encodings.stack import EncodingStack
from vispe.encodings.tables import TableCache
from vispe.encodings.camera import CameraEncoding, FeatureEncoding, MultiViewSine
from vispe.encodings.camera_rays import CameraRays
from vispe.encodings.builder import EncodingInfo, EncodingTable, build_encoding, list_encodings
from vispe.encodings.comrope import ComRoPE
from vispe.encodings.detr_sine import DETRSine, detr_sine_embedding
from vispe.encodings.fourier import FourierFeatures
from vispe.encodings.gta import GTA
from vispe.encodings.irpe import iRPE
from vispe.encodings.kpe import KPE, kpe_center_corner, kpe_dense
from vispe.encodings.learned_ape import LearnedAPE
from vispe.encodings.lookhere import LookHere
from vispe.encodings.loope import LOOPE
from vispe.encodings.nope import NoPE
from vispe.encodings.options import Option, OptionTypeError, OptionValueError, check_test_time_option
from vispe.encodings.peg import PEG
from vispe.encodings.petr import PETR
from vispe.encodings.ppe3d import PPE3D
from vispe.encodings.rope import RoPEAxial, RoPEMixed
from vispe.encodings.rpe2d import RPE2D
from vispe.encodings.seqpe import SeqPE
from vispe.encodings.sincos2d import SinCos2D, sincos_2d_embedding
from vispe.encodings.triplane import TriPlane
from vispe.encodings.vertex_rpe import VertexRPE, vertex_corners
from vispe.encodings.xyz import FourierXYZ, SinCosXYZ, sincos_xyz_embedding

__all__ = [
    'ALiBi2D', 'AbsoluteEncoding', 'EncodingHostError', 'Host', 'add_to_positioned', 'check_encoding_fits',
    'list_hosts', 'register_host', 'require_position_embedding', 'CameraEncoding', 'CameraRays', 'ComRoPE',
    'DETRSine', 'EncodingInfo', 'EncodingStack', 'EncodingTable', 'FeatureEncoding', 'FourierFeatures',
    'FourierXYZ', 'GTA', 'HOOK_NAMES', 'KPE', 'LOOPE', 'LearnedAPE', 'LookHere', 'MultiViewSine', 'NoPE',
    'Option', 'OptionTypeError', 'OptionValueError', 'PEG', 'PETR', 'PPE3D', 'PositionEncoding', 'RPE2D',
    'RoPEAxial', 'RoPEMixed', 'SeqPE', 'SinCos2D', 'SinCosXYZ', 'TableCache', 'TriPlane', 'VertexRPE',
    'build_encoding', 'check_test_time_option', 'detr_sine_embedding', 'iRPE', 'kpe_center_corner', 'kpe_dense',
    'list_encodings', 'sincos_2d_embedding', 'sincos_xyz_embedding', 'vertex_corners',
]
