"""The mesh library of mv-scenes: one real mesh per nuScenes detection class, in a canonical frame.

The meshes come from packages that install offline (no download):

* pymeshlab's wheel ships ``pymeshlab/tests/sample_meshes/`` (Stanford bunny, cow, bone, ...); only
  the files are read (with trimesh), pymeshlab is never imported;
* Debian's ``assimp-testmodels`` ships ``/usr/share/assimp/models/`` (Wuson, spider, ...).

Each mesh is brought to the canonical object frame (x forward = the heading, y left, z up), centred in
x and y on its bounding box, resting on z = 0, and scaled uniformly so that one side has the class's
base size (the others follow the mesh's own proportions). Vertices are float64 (V, 3), faces int32
(F, 3).
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from vispe.datasets.mv_scenes.errors import DegenerateBoxError, MeshFileError
from vispe.extras import import_extra

__all__ = ['ASSIMP_MODELS', 'CLASSES', 'CLASS_MESHES', 'CanonicalMesh', 'ClassMesh', 'load_class_meshes',
           'load_mesh', 'mesh_path', 'mesh_roots']

ASSIMP_MODELS = Path('/usr/share/assimp/models')
INSTALL = {
    'pymeshlab': '`pip install pymeshlab` (vispe reads only its sample mesh files, it never imports pymeshlab)',
    'assimp-testmodels': '`apt-get install assimp-testmodels` (Debian/Ubuntu; or set $VISPE_ASSIMP_MODELS to a '
                         'copy of its models/ folder)',
}
AXES = {'+x': (1, 0, 0), '-x': (-1, 0, 0), '+y': (0, 1, 0), '-y': (0, -1, 0), '+z': (0, 0, 1), '-z': (0, 0, -1)}
SIDES = ('length', 'width', 'height')
# Smallest side (metres) of a class mesh or of a placed object's box.
MIN_SIDE = 1e-3


@dataclass(frozen=True)
class ClassMesh:
    """Which mesh plays a detection class and how it stands.

    Attributes:
        name: nuScenes detection name (``car``, ``truck``, ...).
        category: the nuScenes category that maps to it (``vehicle.car``, ...), written in ``category.json``.
        package: ``'pymeshlab'`` or ``'assimp-testmodels'``.
        file: path inside the package's mesh folder.
        forward: the mesh axis that becomes the heading (+x of the object), e.g. ``'-z'``.
        up: the mesh axis that becomes +z.
        side: which side is scaled to ``size``: ``'length'`` (along the heading), ``'width'`` or ``'height'``.
        size: that side in metres before the per-instance scale jitter.
    """

    name: str
    category: str
    package: str
    file: str
    forward: str
    up: str
    side: str
    size: float


# The five classes, in label order (nuScenes detection names; meshes chosen by a plausible size).
CLASS_MESHES: tuple[ClassMesh, ...] = (
    ClassMesh('car', 'vehicle.car', 'assimp-testmodels', 'OBJ/WusonOBJ.obj', '-z', '+y', 'length', 4.4),
    ClassMesh('truck', 'vehicle.truck', 'pymeshlab', 'cow.obj', '+z', '+y', 'length', 6.5),
    ClassMesh('bicycle', 'vehicle.bicycle', 'assimp-testmodels', 'OBJ/spider.obj', '-x', '+y', 'length', 1.5),
    ClassMesh('pedestrian', 'human.pedestrian.adult', 'pymeshlab', 'bone.ply', '+y', '+x', 'height', 1.75),
    ClassMesh('traffic_cone', 'movable_object.trafficcone', 'pymeshlab', 'bunny.obj', '-x', '+y', 'height', 0.75),
)
CLASSES: tuple[str, ...] = tuple(spec.name for spec in CLASS_MESHES)


@dataclass(frozen=True, eq=False)
class CanonicalMesh:
    """A class mesh in its object frame (x forward, y left, z up), centred in x/y, bottom at z = 0.

    Attributes:
        name: detection name.
        vertices: (V, 3) float64 metres.
        faces: (F, 3) int32 vertex indices.
        path: the file it was read from.
    """

    name: str
    vertices: np.ndarray
    faces: np.ndarray
    path: Path

    @property
    def size(self) -> np.ndarray:
        """(3,) (length, width, height) of its bounding box in metres."""
        return self.vertices.max(0) - self.vertices.min(0)


def mesh_roots() -> dict[str, Path | None]:
    """The mesh folder of each package: pymeshlab's ``tests/sample_meshes`` (found with ``importlib``, not
    imported; None when pymeshlab is not installed) and ``$VISPE_ASSIMP_MODELS`` or Debian's
    ``/usr/share/assimp/models``."""
    spec = importlib.util.find_spec('pymeshlab')
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    pymeshlab = Path(locations[0]) / 'tests' / 'sample_meshes' if locations else None
    return {'pymeshlab': pymeshlab,
            'assimp-testmodels': Path(os.environ.get('VISPE_ASSIMP_MODELS') or ASSIMP_MODELS)}


def mesh_path(spec: ClassMesh, roots: dict[str, Path | None] | None = None) -> Path:
    """The file of a class mesh; :class:`MeshFileError` naming the path and the install command if absent."""
    roots = mesh_roots() if roots is None else roots
    if spec.package not in INSTALL:
        raise ValueError(f'class {spec.name!r}: unknown mesh package {spec.package!r}; use one of {sorted(INSTALL)}')
    root = roots.get(spec.package)
    if root is None:
        raise MeshFileError(f'the {spec.name!r} mesh {spec.file} comes from {spec.package}, which is not '
                            f'installed: install it with {INSTALL[spec.package]}')
    path = Path(root) / spec.file
    if not path.is_file():
        raise MeshFileError(f'the {spec.name!r} mesh {path} does not exist: install it with {INSTALL[spec.package]}')
    return path


def _axis(text: str, what: str, spec: ClassMesh) -> np.ndarray:
    if text not in AXES:
        raise ValueError(f'class {spec.name!r}: {what}={text!r} is not an axis; use one of {sorted(AXES)}')
    return np.array(AXES[text], np.float64)


def load_mesh(spec: ClassMesh, path: Path) -> CanonicalMesh:
    """Read ``path`` (trimesh, no processing) and bring it to the class's canonical frame and base size.

    Raises:
        MeshFileError: the file cannot be parsed or holds no triangles.
        ValueError: non-finite vertices, face indices out of range, or forward/up not perpendicular.
        DegenerateBoxError: a side of the mesh's bounding box is (near) zero.
    """
    trimesh = import_extra('trimesh', 'reading the class meshes of mv-scenes and pt-scenes')

    try:
        kwargs = {'skip_materials': True} if path.suffix.lower() == '.obj' else {}
        mesh = trimesh.load(str(path), force='mesh', process=False, **kwargs)
    except Exception as exc:  # trimesh raises many types for unreadable files
        raise MeshFileError(f'the {spec.name!r} mesh {path} cannot be read ({type(exc).__name__}: {exc}); '
                            f'reinstall it with {INSTALL.get(spec.package, "its package")}') from None
    vertices = np.asarray(getattr(mesh, 'vertices', np.zeros((0, 3))), np.float64)
    faces = np.asarray(getattr(mesh, 'faces', np.zeros((0, 3))), np.int64)
    if vertices.ndim != 2 or vertices.shape[1] != 3 or faces.ndim != 2 or faces.shape[1] != 3 or len(faces) == 0:
        raise MeshFileError(f'the {spec.name!r} mesh {path} holds no triangles (vertices {vertices.shape}, faces '
                            f'{faces.shape}); reinstall it with {INSTALL.get(spec.package, "its package")}')
    if not np.isfinite(vertices).all():
        raise ValueError(f'the {spec.name!r} mesh {path} has {int((~np.isfinite(vertices)).any(1).sum())} vertices '
                         f'with NaN or inf coordinates, which would give NaN depth; use another mesh file')
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise ValueError(f'the {spec.name!r} mesh {path} has face indices outside 0..{len(vertices) - 1}; '
                         f'the file is corrupt')
    forward, up = _axis(spec.forward, 'forward', spec), _axis(spec.up, 'up', spec)
    if abs(forward @ up) > 0:
        raise ValueError(f'class {spec.name!r}: forward {spec.forward} and up {spec.up} must be different axes')
    rotation = np.stack([forward, np.cross(up, forward), up])   # rows: the object's x, y, z in mesh coordinates
    vertices = vertices @ rotation.T
    low, high = vertices.min(0), vertices.max(0)
    extent = high - low
    if spec.side not in SIDES:
        raise ValueError(f'class {spec.name!r}: side={spec.side!r} must be one of {SIDES}')
    if not (extent > MIN_SIDE * extent.max()).all() or not spec.size > 0:
        raise DegenerateBoxError(f'the {spec.name!r} mesh {path} is flat or empty: its (length, width, height) '
                                 f'extent is {extent.round(6).tolist()}, so its box would have a zero side; '
                                 f'use a mesh with volume (and a positive size, got {spec.size})')
    centre = np.array([(low[0] + high[0]) / 2, (low[1] + high[1]) / 2, low[2]])
    scale = spec.size / extent[SIDES.index(spec.side)]
    return CanonicalMesh(spec.name, (vertices - centre) * scale, faces.astype(np.int32), path)


@lru_cache(maxsize=32)
def _load_cached(spec: ClassMesh, path: Path, stamp: tuple[int, int]) -> CanonicalMesh:
    """:func:`load_mesh`, once per file version (``stamp`` = modification time and size); read-only arrays."""
    mesh = load_mesh(spec, path)
    mesh.vertices.setflags(write=False)
    mesh.faces.setflags(write=False)
    return mesh


def load_class_meshes(specs: tuple[ClassMesh, ...] = CLASS_MESHES,
                      roots: dict[str, Path | None] | None = None) -> list[CanonicalMesh]:
    """The canonical meshes of ``specs``, in label order (read once per process and file version)."""
    roots = mesh_roots() if roots is None else roots
    meshes = []
    for spec in specs:
        path = mesh_path(spec, roots)
        status = path.stat()
        meshes.append(_load_cached(spec, path, (status.st_mtime_ns, status.st_size)))
    return meshes
