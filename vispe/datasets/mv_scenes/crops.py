"""mv-crops-depth (``multiview_scenes.py --task crops``): full camera images with dense depth at many focal lengths,
for KPE's task (Prakash et al., ECCV 2024): depth from a crop, where where the crop lies in the camera changes the
answer.

Each image: 3–6 of mv-scenes' meshes (longest side ``object_size`` 1.2 m ±15 %, class hues, random yaws) within
``max_distance`` of a point on a checkered ground (the 2 m squares of mv-scenes), seen by one pinhole camera at
``height`` 1.4–1.8 m, ``distance`` 5–8 m from that point, looking towards it (±0.3 rad of yaw) with a downward pitch
of 6–14°. The horizontal field of view is uniform in the split's range: 45–75° for train, val and test; 90–100° for
``test-wide`` and 30–35° for ``test-tele``, focal lengths never seen in training. OpenCV axes (x right, y down, z
forward), the principal point at the image centre.

The geometry is what a crop cannot tell alone: a ground pixel's depth is ``height / sin(pitch + θy)``, with θy its
viewing angle below the optical axis; a crop, resized, shows the same texture at other depths, and its place in
pixels gives θy only with the focal length.

Per image ``<root>/<split>/<index>.npz`` (read with ``numpy.load(..., allow_pickle=False)``): ``image`` (H, W, 3)
uint8, ``depth`` (H, W) float32 metres (0: sky, or beyond ``max_depth``), ``intrinsics`` (3, 3) float32,
``cam2world`` (4, 4) float64. Seeded by ``(seed, split, index)`` alone; written into ``<root>.partial`` and
renamed when complete.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vispe.datasets.mv_scenes.layout import LayoutConfig, sample_layout
from vispe.datasets.mv_scenes.mesh_workers import WORKER, render_in_workers
from vispe.datasets.mv_scenes.meshes import CLASS_MESHES, CanonicalMesh, load_class_meshes
from vispe.datasets.mv_scenes.nvs import look_at, table_top
from vispe.datasets.mv_scenes.render import SceneRenderer
from vispe.datasets.output_folder import DatasetFolder, atomic_dataset_folder

__all__ = ['CROPS_INFO_FILE', 'CROPS_SPLITS', 'CropsConfig', 'convert_crops', 'render_crops_image']

CROPS_INFO_FILE = 'mv-crops-depth.json'
CROPS_PARTIAL_MARKER = '.mv-crops-depth-partial'
CROPS_FOLDER = DatasetFolder(CROPS_INFO_FILE, CROPS_PARTIAL_MARKER, 'an mv-crops-depth', '--root')
CROPS_SPLITS = ('train', 'val', 'test', 'test-wide', 'test-tele')
CROPS_LAYOUT = LayoutConfig(min_objects=3, max_objects=6, min_distance=0.0, max_distance=3.0,
                            ego_footprint=(500.0, 500.1, 500.0, 500.1))


@dataclass(frozen=True)
class CropsConfig:
    """Everything that shapes the rendered images besides their counts."""

    seed: int = 0
    image_size: tuple[int, int] = (96, 128)
    object_size: float = 1.2
    height: tuple[float, float] = (1.4, 1.8)
    distance: tuple[float, float] = (5.0, 8.0)
    yaw_jitter: float = 0.3
    pitch_degrees: tuple[float, float] = (6.0, 14.0)
    hfov_degrees: dict[str, tuple[float, float]] = field(default_factory=lambda: {
        'train': (45.0, 75.0), 'val': (45.0, 75.0), 'test': (45.0, 75.0), 'test-wide': (90.0, 100.0),
        'test-tele': (30.0, 35.0)})
    layout: LayoutConfig = field(default_factory=lambda: CROPS_LAYOUT)
    max_depth: float = 40.0


def _camera(rng: np.random.Generator, config: CropsConfig) -> np.ndarray:
    """(4, 4) camera-to-world pose looking at the layout's centre (the origin) from a random bearing."""
    bearing = rng.uniform(-math.pi, math.pi)
    distance, height = rng.uniform(*config.distance), rng.uniform(*config.height)
    eye = np.array([distance * math.cos(bearing), distance * math.sin(bearing), height])
    yaw = bearing + math.pi + rng.uniform(-config.yaw_jitter, config.yaw_jitter)
    pitch = math.radians(rng.uniform(*config.pitch_degrees))
    forward = np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), -math.sin(pitch)])
    return look_at(eye, eye + forward)


def render_crops_image(split: str, index: int, config: CropsConfig, meshes: list[CanonicalMesh],
                       nthreads: int = 0) -> dict[str, np.ndarray]:
    """The arrays of one image (see the module docstring)."""
    if split not in config.hfov_degrees:
        raise ValueError(f'split {split!r} has no field-of-view range; CropsConfig.hfov_degrees has '
                         f'{sorted(config.hfov_degrees)}')
    rng = np.random.default_rng([config.seed, CROPS_SPLITS.index(split), index])
    height, width = config.image_size
    hfov = math.radians(rng.uniform(*config.hfov_degrees[split]))
    focal = width / 2 / math.tan(hfov / 2)
    intrinsics = np.array([[focal, 0, (width - 1) / 2], [0, focal, (height - 1) / 2], [0, 0, 1]])
    pose = _camera(rng, config)
    objects = sample_layout(rng, table_top(meshes, config.object_size), 0.0, config.layout)
    renderer = SceneRenderer(objects, 0.0, np.eye(4), nthreads=nthreads)
    view = renderer.render_camera(intrinsics, pose, config.image_size, config.max_depth, f'{split} image {index}')
    return dict(image=view.image, depth=view.depth, intrinsics=intrinsics.astype(np.float32), cam2world=pose)


def _write_image(task: tuple[str, int], out_root: Path, config: CropsConfig | None = None,
                 meshes: list[CanonicalMesh] | None = None) -> tuple[str, float]:
    split, index = task
    arrays = render_crops_image(split, index, config or WORKER['config'], meshes or WORKER['meshes'],
                                nthreads=0 if meshes is not None else 1)
    np.savez_compressed(out_root / split / f'{index:05d}.npz', **arrays)
    return split, float((arrays['depth'] > 0).mean())


def convert_crops(root: str | Path, counts: dict[str, int] | None = None, *, config: CropsConfig = CropsConfig(),
                  workers: int = 1, overwrite: bool = False, progress: bool = True,
                  roots: dict[str, Path | None] | None = None, command: str | None = None) -> dict[str, Any]:
    """Render the images into ``root`` (``counts`` per split, default 2000 train and 200 of every other split);
    returns the summary written to ``<root>/mv-crops-depth.json``."""
    from tqdm import tqdm

    counts = {split: 2000 if split == 'train' else 200 for split in CROPS_SPLITS} | dict(counts or {})
    unknown = sorted(set(counts) - set(CROPS_SPLITS))
    if unknown:
        raise ValueError(f'unknown splits {unknown}; mv-crops-depth has {list(CROPS_SPLITS)}')
    if counts['train'] < 1 or counts['val'] < 1:
        raise ValueError(f'need at least one train and one val image, got {counts}')
    root = Path(root)
    meshes = load_class_meshes(roots=roots)
    with atomic_dataset_folder(root, overwrite, CROPS_FOLDER) as partial:
        for split in CROPS_SPLITS:
            (partial / split).mkdir()
        tasks = [(split, index) for split in CROPS_SPLITS for index in range(counts[split])]
        valid = {split: 0.0 for split in CROPS_SPLITS}
        rendered = render_in_workers(_write_image, tasks, partial, config, meshes, workers, roots, __name__, 16)
        for split, fraction in tqdm(rendered, total=len(tasks), desc='mv-crops-depth', unit='image',
                                      disable=not progress):
            valid[split] += fraction
        info = dict(generator='vispe.datasets.mv_scenes.crops', command=command,
                    config=json.loads(json.dumps(asdict(config))), images=counts,
                    depth_pixel_fraction={split: valid[split] / max(1, counts[split]) for split in CROPS_SPLITS},
                    classes=[spec.name for spec in CLASS_MESHES])
        (partial / CROPS_INFO_FILE).write_text(json.dumps(info, indent=1))
    return info

