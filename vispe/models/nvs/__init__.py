"""Novel-view synthesis: an SRT-style model whose camera geometry comes from a vispe encoding (GTA's task)."""
from vispe.models.nvs.srt import NovelViewTransformer, RayDecoderLayer, view_cnn

__all__ = ['NovelViewTransformer', 'RayDecoderLayer', 'view_cnn']
