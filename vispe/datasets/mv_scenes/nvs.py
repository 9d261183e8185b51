"""mv-scenes for novel-view synthesis (``multiview_scenes.py --task nvs``): small scenes of real meshes seen by a few
input cameras and by target cameras not among them, rendered on the CPU with the same ray caster as mv-scenes.

Each scene: 1–3 objects (mv-scenes' meshes and class hues, each mesh scaled so that its longest side is
``object_size`` (2 m) ±15 %, random yaws) within 1.2 m of the origin on a plain ground (``ground_contrast`` 0: the
detection set's checkerboard would be most of what a model has to paint); ``input_views`` cameras on a ring around
it (radius 3.2–4 m, height 1.5–2.5 m, spread about the circle with ±0.35 rad jitter) and ``target_views`` cameras
at independent random azimuths on the same ring, all looking at a point near (0, 0, 0.5) m. About 13 % of the
pixels see an object.
Pinhole cameras, OpenCV axes (x right, y down, z forward), ``hfov`` 60°.

Per scene ``<root>/<split>/<index>.npz`` (read with ``numpy.load(..., allow_pickle=False)``):

* ``images`` (V, H, W, 3) uint8, the inputs first, then the targets; ``depth`` (V, H, W) float32 metres (0: none);
* ``objects`` (V, H, W) bool, the pixels that see an object first (for metrics over object pixels only);
* ``intrinsics`` (V, 3, 3) float32 and ``cam2world`` (V, 4, 4) float64 camera-to-world poses;
* ``num_inputs`` () int: how many of the V views are inputs.

Seeded by ``(seed, split, index)`` alone, so the files do not depend on the number of workers; written into
``<root>.partial`` and renamed when complete.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vispe.datasets.mv_scenes.errors import EmptySceneError
from vispe.datasets.mv_scenes.layout import LayoutConfig, sample_layout
from vispe.datasets.mv_scenes.mesh_workers import WORKER, render_in_workers
from vispe.datasets.mv_scenes.meshes import CLASS_MESHES, CanonicalMesh, load_class_meshes
from vispe.datasets.mv_scenes.render import SceneRenderer
from vispe.datasets.output_folder import DatasetFolder, atomic_dataset_folder

__all__ = ['NVS_INFO_FILE', 'NVS_SPLITS', 'NVSConfig', 'convert_nvs', 'look_at', 'render_nvs_scene']

NVS_INFO_FILE = 'mv-scenes-nvs.json'
NVS_PARTIAL_MARKER = '.mv-scenes-nvs-partial'
NVS_FOLDER = DatasetFolder(NVS_INFO_FILE, NVS_PARTIAL_MARKER, 'an mv-scenes NVS', '--root')
NVS_SPLITS = ('train', 'val', 'test')
# Objects keep clear of nothing but each other: the ego-car rectangle of mv-scenes is moved far away.
NVS_LAYOUT = LayoutConfig(min_objects=1, max_objects=3, min_distance=0.0, max_distance=1.2,
                          ego_footprint=(500.0, 500.1, 500.0, 500.1))


@dataclass(frozen=True)
class NVSConfig:
    """Everything that shapes the rendered scenes besides their counts."""

    seed: int = 0
    image_size: tuple[int, int] = (48, 64)
    object_size: float = 2.0
    input_views: int = 3
    target_views: int = 2
    hfov_degrees: float = 60.0
    radius: tuple[float, float] = (3.2, 4.0)
    height: tuple[float, float] = (1.5, 2.5)
    look_at_jitter: float = 0.3
    input_azimuth_jitter: float = 0.35
    layout: LayoutConfig = field(default_factory=lambda: NVS_LAYOUT)
    max_depth: float = 30.0
    max_redraws: int = 10
    ground_contrast: float = 0.0


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(4, 4) camera-to-world pose of a camera at ``eye`` looking at ``target``, OpenCV axes (x right, y down,
    z forward), world z up."""
    forward = target - eye
    forward = forward / np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right = right / np.linalg.norm(right)
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, forward], axis=1)
    pose[:3, 3] = eye
    return pose


def _camera_poses(rng: np.random.Generator, config: NVSConfig) -> np.ndarray:
    """(V, 4, 4) poses: the inputs spread about the ring, then the targets at random azimuths."""
    base = rng.uniform(-math.pi, math.pi)
    spread = 2 * math.pi / config.input_views
    inputs = base + spread * np.arange(config.input_views) + rng.uniform(
        -config.input_azimuth_jitter, config.input_azimuth_jitter, config.input_views)
    azimuths = np.concatenate([inputs, rng.uniform(-math.pi, math.pi, config.target_views)])
    poses = []
    for azimuth in azimuths:
        radius, height = rng.uniform(*config.radius), rng.uniform(*config.height)
        eye = np.array([radius * math.cos(azimuth), radius * math.sin(azimuth), height])
        target = np.array([0.0, 0.0, 0.5]) + rng.uniform(-config.look_at_jitter, config.look_at_jitter, 3)
        poses.append(look_at(eye, target))
    return np.stack(poses)


def table_top(meshes: list[CanonicalMesh], object_size: float) -> list[CanonicalMesh]:
    """The class meshes scaled so that the longest side of each is ``object_size`` metres."""
    return [dataclasses.replace(mesh, vertices=mesh.vertices * (object_size / float(mesh.size.max())))
            for mesh in meshes]


def render_nvs_scene(split: str, index: int, config: NVSConfig, meshes: list[CanonicalMesh],
                     nthreads: int = 0) -> dict[str, np.ndarray]:
    """The arrays of one scene (see the module docstring); a layout without objects, or one whose objects no
    input view sees, is redrawn up to ``max_redraws`` times, then :class:`EmptySceneError`."""
    meshes = table_top(meshes, config.object_size)
    rng = np.random.default_rng([config.seed, NVS_SPLITS.index(split), index])
    height, width = config.image_size
    focal = width / 2 / math.tan(math.radians(config.hfov_degrees) / 2)
    intrinsics = np.array([[focal, 0, (width - 1) / 2], [0, focal, (height - 1) / 2], [0, 0, 1]])
    poses = _camera_poses(rng, config)
    for _ in range(config.max_redraws + 1):
        objects = sample_layout(rng, meshes, 0.0, config.layout)
        if not objects:
            continue
        renderer = SceneRenderer(objects, 0.0, np.eye(4), nthreads=nthreads,
                                  ground_contrast=config.ground_contrast)
        views = [renderer.render_camera(intrinsics, pose, config.image_size, config.max_depth,
                                        f'{split} scene {index} view {view}') for view, pose in enumerate(poses)]
        if sum(int(view.visible.sum()) for view in views[:config.input_views]) > 0:
            return dict(images=np.stack([view.image for view in views]),
                        depth=np.stack([view.depth for view in views]),
                        objects=np.stack([view.geometry > 0 for view in views]),
                        intrinsics=np.repeat(intrinsics[None].astype(np.float32), len(poses), axis=0),
                        cam2world=poses, num_inputs=np.array(config.input_views))
    raise EmptySceneError(f'{split} scene {index}: no layout with an object the input views see in '
                          f'{config.max_redraws + 1} draws; change the seed or the layout')


def _write_scene(task: tuple[str, int], out_root: Path, config: NVSConfig | None = None,
                 meshes: list[CanonicalMesh] | None = None) -> tuple[str, int]:
    split, index = task
    arrays = render_nvs_scene(split, index, config or WORKER['config'], meshes or WORKER['meshes'],
                              nthreads=0 if meshes is not None else 1)
    np.savez_compressed(out_root / split / f'{index:05d}.npz', **arrays)
    return split, int(arrays['objects'].sum())


def convert_nvs(root: str | Path, train: int = 4000, val: int = 100, test: int = 100, *,
                config: NVSConfig = NVSConfig(), workers: int = 1, overwrite: bool = False, progress: bool = True,
                roots: dict[str, Path | None] | None = None, command: str | None = None) -> dict[str, Any]:
    """Render the NVS scenes into ``root``; returns the summary written to ``<root>/mv-scenes-nvs.json``."""
    from tqdm import tqdm

    root = Path(root)
    counts = {'train': train, 'val': val, 'test': test}
    if train < 1 or val < 1:
        raise ValueError(f'need at least one train and one val scene, got train={train}, val={val}')
    meshes = load_class_meshes(roots=roots)
    with atomic_dataset_folder(root, overwrite, NVS_FOLDER) as partial:
        for split in NVS_SPLITS:
            (partial / split).mkdir()
        tasks = [(split, index) for split in NVS_SPLITS for index in range(counts[split])]
        object_pixels = {split: 0 for split in NVS_SPLITS}
        rendered = render_in_workers(_write_scene, tasks, partial, config, meshes, workers, roots, __name__, 8)
        for split, pixels in tqdm(rendered, total=len(tasks), desc='mv-scenes nvs', unit='scene',
                                  disable=not progress):
            object_pixels[split] += pixels
        views = config.input_views + config.target_views
        info = dict(generator='vispe.datasets.mv_scenes.nvs', command=command,
                    config=json.loads(json.dumps(asdict(config))), scenes=counts,
                    object_pixel_fraction={split: object_pixels[split] / max(1, counts[split] * views
                                                                              * config.image_size[0]
                                                                              * config.image_size[1])
                                           for split in NVS_SPLITS},
                    classes=[spec.name for spec in CLASS_MESHES])
        (partial / NVS_INFO_FILE).write_text(json.dumps(info, indent=1))
    return info
