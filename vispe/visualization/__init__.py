"""Attention maps and what encodings do."""
from vispe.visualization.attention_maps import attention_rollout, overlay, query_index, query_map
from vispe.visualization.capture import capture_attention, capture_cross_attention
from vispe.visualization.encoding_maps import embedding_similarity, relative_logits

__all__ = ['attention_rollout', 'capture_attention', 'capture_cross_attention', 'embedding_similarity', 'overlay',
           'query_index', 'query_map', 'relative_logits']
