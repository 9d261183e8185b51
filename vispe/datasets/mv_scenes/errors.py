"""Errors of the mv-scenes conversion; each message names the scene, camera or file and the fix."""
from __future__ import annotations

__all__ = ['DatasetExistsError', 'DegenerateBoxError', 'EmptySceneError', 'MeshFileError', 'RenderError']


class MeshFileError(FileNotFoundError):
    """A mesh file of the class library is missing or unreadable (the message names the install command)."""


class DegenerateBoxError(ValueError):
    """An object's tight box has a side of (near) zero length: a flat or collapsed mesh, or a zero scale."""


class RenderError(ValueError):
    """A camera or the lidar would give NaN / undefined depth (non-finite or singular calibration, NaN geometry)."""


class EmptySceneError(RuntimeError):
    """No layout with every object seen by a camera or the lidar was found within the allowed redraws."""


class DatasetExistsError(FileExistsError):
    """The output root already holds a data set (pass ``overwrite=True`` / ``--overwrite``) or is not ours."""
