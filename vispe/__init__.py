"""vispe: positional encodings for vision and 3D transformers.

    >>> import vispe
    >>> vispe.list_encodings()
    >>> vit = vispe.create_vit('vit_small_patch16_224', encoding=dict(type='SinCos2D'), num_classes=10)
"""
from vispe.registry import ENCODINGS, METRICS, MODELS, DATASETS, TRANSFORMS, load_plugins  # noqa: I001 (compat first)
from vispe.checkpoint import CheckpointMismatchError, NonFiniteWeightsError, load_checkpoint
from vispe.serialization import CorruptCheckpointError, UnsafeCheckpointError
from vispe import datasets, evaluation  # noqa: F401 (registers datasets and metrics)
from vispe.encodings import PositionEncoding, build_encoding, list_encodings, list_hosts
from vispe.geometry import Positions
from vispe.geometry.checks import set_value_checks, value_checks
from vispe.models import VisionTransformer, create_vit, retrofit
from vispe.visualization import capture_attention

__version__ = '0.5.0'

__all__ = [
    'DATASETS', 'ENCODINGS', 'METRICS', 'MODELS', 'TRANSFORMS', 'CheckpointMismatchError', 'CorruptCheckpointError',
    'NonFiniteWeightsError', 'PositionEncoding', 'Positions', 'UnsafeCheckpointError', 'VisionTransformer',
    'build_encoding', 'capture_attention', 'create_vit', 'list_encodings', 'list_hosts', 'load_checkpoint',
    'load_plugins', 'retrofit', 'set_value_checks', 'value_checks',
]
