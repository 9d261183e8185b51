"""pt-scenes: a real-geometry point-cloud 3D detection set in ScanNet's preprocessed layout, scanned on the CPU.

Real meshes (pymeshlab's sample meshes, Debian's assimp-testmodels; seven classes) stand in rectangular
rooms, against walls and against one another; open3d's ``RaycastingScene`` scans each room from 2-4
positions (occlusion, density falling with distance), the scans are merged, voxel-down-sampled and
coloured, and the tight boxes of the meshes are the annotations. ``vispe dataset
point-scenes`` writes it, :class:`vispe.datasets.point_scenes.PointScenes` reads it (and real
ScanNet), ``datasets/README.md`` documents it.

    >>> from vispe.datasets.pt_scenes import convert
    >>> convert('datasets/pt-scenes', train=800, val=100, test=100)
"""
from vispe.datasets.pt_scenes.classes import BACKGROUND_ID, CLASS_IDS, CLASS_MESHES, CLASSES
from vispe.datasets.pt_scenes.conversion import (INFO_FILE, MAX_SCENES, POINTS_DIR, SPLIT_FILE, SPLITS, VERSION,
                                                 ConversionConfig, SceneArrays, SceneRecord, convert, make_scene,
                                                 scene_name)
from vispe.datasets.pt_scenes.room import Room, RoomConfig, sample_room
from vispe.datasets.pt_scenes.scan import Scan, ScanConfig, scan_room

__all__ = ['BACKGROUND_ID', 'CLASSES', 'CLASS_IDS', 'CLASS_MESHES', 'INFO_FILE', 'MAX_SCENES', 'POINTS_DIR',
           'SPLITS', 'SPLIT_FILE', 'VERSION', 'ConversionConfig', 'Room', 'RoomConfig', 'Scan', 'ScanConfig',
           'SceneArrays', 'SceneRecord', 'convert', 'make_scene', 'sample_room', 'scan_room', 'scene_name']
