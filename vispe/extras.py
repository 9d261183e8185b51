"""vispe's optional extras: which installed package each optional feature needs, and the error that names the extra.

The core install (``pip install vispe``) is what the 2D encodings, the ViT and DETR need. Features beyond it import
their packages where they are used, through :func:`import_extra`, so ``import vispe`` never needs them and a
missing one is an :class:`MissingExtraError` (an ImportError) naming ``pip install "vispe[EXTRA]"``.
"""
from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ['EXTRAS', 'MissingExtraError', 'NUSCENES_DEVKIT_INSTALL', 'import_extra']

# The devkit pins numpy<2 in its metadata but the parts vispe uses run on numpy 2 (tested): its dependencies come
# with the extra, the devkit itself without its pins.
NUSCENES_DEVKIT_INSTALL = 'pip install "vispe[nuscenes]" && pip install --no-deps nuscenes-devkit==1.2.0'

# Top-level module -> (the extra that installs it, the distribution's name on PyPI).
EXTRAS: dict[str, tuple[str, str]] = {
    'open3d': ('3d', 'open3d'),
    'trimesh': ('3d', 'trimesh'),
    'skimage': ('3d', 'scikit-image'),
    'fpsample': ('3d', 'fpsample'),
    'plyfile': ('gaussians', 'plyfile'),
    'constriction': ('gaussians', 'constriction'),
    'pytorch_wavelets': ('gaussians', 'pytorch_wavelets'),
    'pywt': ('gaussians', 'PyWavelets'),
    'gsplat': ('render', 'gsplat'),
    'onnx': ('export', 'onnx'),
    'onnxscript': ('export', 'onnxscript'),
    'onnxruntime': ('export', 'onnxruntime'),
    'nuscenes': ('nuscenes', 'nuscenes-devkit'),
    'tensorboard': ('tensorboard', 'tensorboard'),
    'wandb': ('wandb', 'wandb'),
    'mlflow': ('mlflow', 'mlflow'),
}


class MissingExtraError(ImportError):
    """An optional feature's package is not installed; the message names the extra that installs it."""


def install_command(module: str) -> str:
    """The command that installs the extra providing ``module`` (a key of :data:`EXTRAS`)."""
    extra, _ = EXTRAS[module]
    return NUSCENES_DEVKIT_INSTALL if extra == 'nuscenes' else f'pip install "vispe[{extra}]"'


def import_extra(name: str, feature: str) -> ModuleType:
    """Import ``name`` (a module of a package in :data:`EXTRAS`, e.g. ``'open3d'`` or ``'skimage.data'``) for
    ``feature`` (what the user asked for, e.g. ``'reading .ply point clouds'``), or raise a
    :class:`MissingExtraError` naming the package and the install command."""
    top = name.split('.')[0]
    if top not in EXTRAS:
        raise KeyError(f'{top!r} is not an optional package of vispe; the extras install: {", ".join(EXTRAS)}')
    try:
        return importlib.import_module(name)
    except ImportError as error:
        _, distribution = EXTRAS[top]
        raise MissingExtraError(f'{feature} needs {distribution}, which does not import here ({error}). Install '
                                f'it with: {install_command(top)}') from error
