"""Models built around vispe encodings: the timm ViT classifier and the DETR detector."""
from vispe.models.classifier import ImageClassifier
from vispe.models.detr import DETR, TimmFeatures
from vispe.models.optim import NoDecayOptimWrapperConstructor
from vispe.models.vit import Block, VisionTransformer, create_vit, retrofit

__all__ = ['Block', 'DETR', 'ImageClassifier', 'NoDecayOptimWrapperConstructor', 'TimmFeatures', 'VisionTransformer',
           'create_vit', 'retrofit']
