"""Datasets and their pipelines, registered in :data:`vispe.registry.DATASETS`."""
from vispe.datasets.coco_detection import CocoDetection, detr_collate
from vispe.datasets.crop_depth import CropDepth, crop_depth_collate
from vispe.datasets.fashion_mnist import FashionMNIST
from vispe.datasets.image_folder import ImageFolderDataset
from vispe.datasets.multiview_detection import MultiViewDetection, multiview_collate
from vispe.datasets.nuscenes_tables import NuScenesTables
from vispe.datasets.nvs_scenes import NVSScenes, nvs_collate
from vispe.datasets.point_scenes import PointScenes, pointscenes_collate
from vispe.datasets.three_cell import ThreeCells
from vispe.datasets.transforms import classification_transform

__all__ = [
    'CocoDetection', 'CropDepth', 'FashionMNIST', 'ImageFolderDataset', 'MultiViewDetection', 'NVSScenes',
    'NuScenesTables', 'PointScenes', 'ThreeCells', 'classification_transform', 'crop_depth_collate',
    'detr_collate', 'multiview_collate', 'nvs_collate', 'pointscenes_collate',
]
