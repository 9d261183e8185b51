"""How much a class mesh looks the same after part of a turn about the vertical: which mv-scenes classes have a
heading that images can tell, and which are evaluated with a shorter orientation period (as nuScenes' barriers).

A mesh's surface is sampled, turned by ``360° / n`` about +z through its box centre, and compared with the unturned
samples by the symmetric mean nearest-neighbour distance (chamfer), relative to the mesh's horizontal size (the
mean of its length and width). Mirroring y (left-right) measures the sampling's own floor: every mv-scenes mesh but
the cone (the bunny) is left-right symmetric, so its mirror distance is what "the same shape" measures.
"""
from __future__ import annotations

import numpy as np

from vispe.datasets.mv_scenes.meshes import CanonicalMesh
from vispe.extras import import_extra

__all__ = ['mirror_distance', 'turn_distance']


def _surface(mesh: CanonicalMesh, samples: int, seed: int) -> np.ndarray:
    """(samples, 3) points on the mesh's surface, area-uniform, with x/y centred on its box."""
    trimesh = import_extra('trimesh', 'measuring mesh symmetry')
    surface = trimesh.Trimesh(mesh.vertices, mesh.faces, process=False)
    points = np.asarray(trimesh.sample.sample_surface(surface, samples, seed=seed)[0])
    centre = (mesh.vertices[:, :2].max(0) + mesh.vertices[:, :2].min(0)) / 2
    return points - np.r_[centre, 0.0]


def _relative_chamfer(points: np.ndarray, moved: np.ndarray, mesh: CanonicalMesh) -> float:
    from scipy.spatial import cKDTree
    there = cKDTree(points).query(moved)[0].mean()
    back = cKDTree(moved).query(points)[0].mean()
    return float((there + back) / 2 / mesh.size[:2].mean())


def turn_distance(mesh: CanonicalMesh, fold: int, samples: int = 20000, seed: int = 0) -> float:
    """The chamfer distance between the mesh and itself turned by 1/``fold`` of a turn about +z, relative to its
    horizontal size (0: symmetric under that turn)."""
    if fold < 2:
        raise ValueError(f'fold must be >= 2 (a turn by 360°/fold); got {fold}.')
    angle = 2 * np.pi / fold
    turn = np.array([[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0.0, 0.0, 1.0]])
    points = _surface(mesh, samples, seed)
    return _relative_chamfer(points, points @ turn.T, mesh)


def mirror_distance(mesh: CanonicalMesh, samples: int = 20000, seed: int = 0) -> float:
    """The chamfer distance between the mesh and its left-right mirror image (y -> -y), relative to its
    horizontal size."""
    points = _surface(mesh, samples, seed)
    return _relative_chamfer(points, points * np.array([1.0, -1.0, 1.0]), mesh)
