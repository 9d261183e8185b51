"""Models built around vispe encodings: the timm ViT backbone (detectors and 3D models follow)."""
from vispe.models.classifier import ImageClassifier
from vispe.models.optim import NoDecayOptimWrapperConstructor
from vispe.models.vit import Block, VisionTransformer, create_vit, retrofit

__all__ = ['Block', 'ImageClassifier', 'NoDecayOptimWrapperConstructor', 'VisionTransformer', 'create_vit', 'retrofit']
