"""Attention maps and what encodings do."""
from vispe.visualization.attention_maps import attention_rollout, overlay, query_index, query_map
from vispe.visualization.capture import capture_attention

__all__ = ['attention_rollout', 'capture_attention', 'overlay', 'query_index', 'query_map']
