"""Datasets and their pipelines, registered in :data:`vispe.registry.DATASETS`."""
from vispe.datasets.fashion_mnist import FashionMNIST
from vispe.datasets.transforms import classification_transform

__all__ = ['FashionMNIST', 'classification_transform']
