"""Models built around vispe encodings: the timm ViT classifier, the DETR detector, the PETR / 3DPPE multi-view
3D detector, the V-DETR-style point-cloud detector, the SRT-style novel-view synthesis model and the crop-depth ViT."""
from vispe.models.classifier import ImageClassifier
from vispe.models.crop_depth import CropDepthViT
from vispe.models.detr import DETR, TimmFeatures
from vispe.models.nvs import NovelViewTransformer
from vispe.models.optim import NoDecayOptimWrapperConstructor
from vispe.models.petr import PETRDetector
from vispe.models.vdetr import VDETR, PointSetAbstraction
from vispe.models.vit import Block, VisionTransformer, retrofit
from vispe.models.vit_factory import create_vit
from vispe.models.timm_hub import vispe_vit  # noqa: I001 (registers vispe_vit with timm)

__all__ = ['Block', 'CropDepthViT', 'DETR', 'ImageClassifier', 'NoDecayOptimWrapperConstructor', 'NovelViewTransformer', 'PETRDetector', 'PointSetAbstraction',
           'TimmFeatures', 'VDETR', 'VisionTransformer', 'create_vit', 'retrofit']
