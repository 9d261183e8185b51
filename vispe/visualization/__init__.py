"""Attention maps and what encodings do."""
from vispe.visualization.capture import capture_attention

__all__ = ['capture_attention']
