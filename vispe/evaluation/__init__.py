"""Metrics as mmengine metrics, registered in :data:`vispe.registry.METRICS`."""
from vispe.evaluation.accuracy import Accuracy
from vispe.evaluation.coco_metric import CocoMetric
from vispe.evaluation.crop_depth_metric import CropDepthMetric
from vispe.evaluation.indoor_ap import IndoorAP
from vispe.evaluation.nuscenes_metric import NuScenesMetric
from vispe.evaluation.nvs_metric import NVSMetric

__all__ = ['Accuracy', 'CocoMetric', 'CropDepthMetric', 'IndoorAP', 'NuScenesMetric', 'NVSMetric']
