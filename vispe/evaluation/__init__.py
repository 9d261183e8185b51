"""Metrics as mmengine metrics, registered in :data:`vispe.registry.METRICS`."""
from vispe.evaluation.accuracy import Accuracy

__all__ = ['Accuracy']
