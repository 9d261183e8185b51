"""Encodings, one file per family, each registered in :data:`vispe.registry.ENCODINGS`."""
from vispe.encodings.base import HOOK_NAMES, EncodingStack, PositionEncoding, TableCache
from vispe.encodings.builder import EncodingInfo, EncodingTable, build_encoding, list_encodings
from vispe.encodings.comrope import ComRoPE
from vispe.encodings.fourier import FourierFeatures
from vispe.encodings.learned_ape import LearnedAPE
from vispe.encodings.nope import NoPE
from vispe.encodings.rope import RoPEAxial, RoPEMixed
from vispe.encodings.rpe2d import RPE2D
from vispe.encodings.sincos2d import SinCos2D, sincos_2d_embedding

__all__ = [
    'HOOK_NAMES', 'ComRoPE', 'EncodingInfo', 'EncodingStack', 'EncodingTable', 'FourierFeatures', 'LearnedAPE',
    'NoPE', 'PositionEncoding', 'RPE2D', 'RoPEAxial', 'RoPEMixed', 'SinCos2D', 'TableCache', 'build_encoding',
    'list_encodings', 'sincos_2d_embedding',
]
