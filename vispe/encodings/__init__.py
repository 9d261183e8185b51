"""Encodings, one file per family, each registered in :data:`vispe.registry.ENCODINGS`."""
from vispe.encodings.base import HOOK_NAMES, EncodingStack, PositionEncoding, TableCache
from vispe.encodings.builder import EncodingInfo, EncodingTable, build_encoding, list_encodings
from vispe.encodings.fourier import FourierFeatures
from vispe.encodings.learned_ape import LearnedAPE
from vispe.encodings.nope import NoPE
from vispe.encodings.sincos2d import SinCos2D, sincos_2d_embedding

__all__ = [
    'HOOK_NAMES', 'EncodingInfo', 'EncodingStack', 'EncodingTable', 'FourierFeatures', 'LearnedAPE', 'NoPE',
    'PositionEncoding', 'SinCos2D', 'TableCache', 'build_encoding', 'list_encodings', 'sincos_2d_embedding',
]
