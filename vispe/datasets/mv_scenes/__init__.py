"""mv-scenes: a real-geometry multi-camera 3D detection set in the nuScenes format, rendered on the CPU.

Real meshes (pymeshlab's sample meshes, Debian's assimp-testmodels) stand on a ground plane at random
positions, yaws and scales; open3d's ``RaycastingScene`` renders six pinhole cameras (RGB and dense depth)
and a 32-beam lidar; the annotations are the meshes' tight boxes. ``vispe dataset
multiview-scenes`` writes it; ``datasets/README.md`` documents it.

    >>> from vispe.datasets.mv_scenes import convert
    >>> convert('datasets/mv-scenes', train=2000, val=300)
"""
from vispe.datasets.mv_scenes.conversion import (INFO_FILE, SPLITS, VERSION, ConversionConfig, SampleSetup, SampleTask,
                                              convert, plan_tasks, render_task, sample_setup)
from vispe.datasets.mv_scenes.devkit import detection_config
from vispe.datasets.mv_scenes.errors import (DatasetExistsError, DegenerateBoxError, EmptySceneError, MeshFileError,
                                             RenderError)
from vispe.datasets.mv_scenes.layout import LayoutConfig, PlacedObject, sample_layout, tight_box
from vispe.datasets.mv_scenes.meshes import CLASS_MESHES, CLASSES, ClassMesh, load_class_meshes
from vispe.datasets.mv_scenes.render import SceneRenderer
from vispe.datasets.mv_scenes.rigs import LIDAR, RIG1, RIG2, CameraMount, LidarSpec, Rig, RigJitter, calibrate

__all__ = ['CLASSES', 'CLASS_MESHES', 'INFO_FILE', 'LIDAR', 'RIG1', 'RIG2', 'SPLITS', 'VERSION', 'CameraMount',
           'ClassMesh', 'ConversionConfig', 'DatasetExistsError', 'DegenerateBoxError', 'EmptySceneError',
           'LayoutConfig', 'LidarSpec', 'MeshFileError', 'PlacedObject', 'RenderError', 'Rig', 'RigJitter',
           'SampleSetup', 'SampleTask', 'SceneRenderer', 'calibrate', 'convert', 'detection_config',
           'load_class_meshes', 'plan_tasks', 'render_task', 'sample_layout', 'sample_setup', 'tight_box']
