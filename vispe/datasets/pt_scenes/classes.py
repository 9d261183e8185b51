"""The object classes of pt-scenes: seven real meshes that install offline, each one class.

The meshes are read with mv-scenes' loader (:func:`vispe.datasets.mv_scenes.meshes.load_class_meshes`):
pymeshlab's sample meshes and Debian's assimp-testmodels, brought to the object frame (x forward, y left,
z up), centred in x/y, resting on z = 0 and scaled so that one side has the base size below. Each
instance then gets its own scale per axis (:class:`~vispe.datasets.pt_scenes.room.RoomConfig`), so a
class is told apart by its shape, not by a fixed size.

Class ids (the last column of ``<scene>_bbox.npy`` and the values of ``<scene>_sem_label.npy``) are
1..7 in the order below; 0 is the background (floor and walls). Labels are 0..6 in the same order.
"""
from __future__ import annotations

from vispe.datasets.mv_scenes.meshes import ClassMesh

__all__ = ['BACKGROUND_ID', 'CLASSES', 'CLASS_IDS', 'CLASS_MESHES']

# name, category (a free-text description here), package, file, forward axis, up axis, scaled side, base size (m).
CLASS_MESHES: tuple[ClassMesh, ...] = (
    ClassMesh('bunny', 'Stanford bunny', 'pymeshlab', 'bunny.obj', '-x', '+y', 'height', 0.6),
    ClassMesh('cow', 'cow', 'pymeshlab', 'cow.obj', '+z', '+y', 'length', 1.5),
    ClassMesh('bone', 'bone standing on end', 'pymeshlab', 'bone.ply', '+y', '+x', 'height', 1.2),
    ClassMesh('airplane', 'toy airplane', 'pymeshlab', 'airplane.obj', '+z', '+y', 'width', 1.4),
    ClassMesh('wuson', 'Wuson figure', 'assimp-testmodels', 'OBJ/WusonOBJ.obj', '-z', '+y', 'length', 1.4),
    ClassMesh('spider', 'spider', 'assimp-testmodels', 'OBJ/spider.obj', '-x', '+y', 'length', 0.9),
    ClassMesh('engine', 'two-cylinder engine', 'assimp-testmodels',
              'glTF2/2CylinderEngine-glTF-Binary/2CylinderEngine.glb', '+x', '+y', 'length', 1.3),
)
CLASSES: tuple[str, ...] = tuple(spec.name for spec in CLASS_MESHES)
CLASS_IDS: tuple[int, ...] = tuple(range(1, len(CLASS_MESHES) + 1))
BACKGROUND_ID = 0
