"""Checks of nuScenes-format tables, run when :class:`~vispe.datasets.nuscenes_tables.NuScenesTables` loads
them (the camera channels when :class:`~vispe.datasets.MultiViewDetection` reads cameras from them). Mistakes that
would silently drop data warn (a custom rig or label set may mean them), naming the file, the names seen, the known
names and the fix: a camera channel under another name (its view is missing from every sample), a category under
another name (its boxes are never targets). Annotations that are no box are refused.
"""
from __future__ import annotations

import difflib
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ['NON_DETECTION_CATEGORIES', 'check_annotation_boxes', 'check_camera_channels', 'check_categories']

# The nuScenes v1.0 categories that have no detection name (they are not detection targets).
NON_DETECTION_CATEGORIES = ('animal', 'human.pedestrian.personal_mobility', 'human.pedestrian.stroller',
                            'human.pedestrian.wheelchair', 'movable_object.debris', 'movable_object.pushable_pullable',
                            'static_object.bicycle_rack', 'vehicle.emergency.ambulance', 'vehicle.emergency.police')


def _renames(names: Sequence[str], known: Sequence[str], alias: Mapping[str, str] | None = None) -> list[str]:
    """``'name' -> 'known name'`` for each of ``names`` close to (or, by ``alias``, standing for) a known name."""
    folded = {name.lower(): name for name in known}
    renames = []
    for name in names:
        close = (alias or {}).get(name) or folded.get(name.lower()) or next(
            iter(difflib.get_close_matches(name.lower(), list(folded), n=1)), None)
        if close is not None:
            renames.append(f'{name!r} -> {folded.get(close.lower(), close)!r}')
    return renames


def check_camera_channels(sensors: Sequence[Mapping[str, Any]], path: Path, cameras: Sequence[str]) -> None:
    """Warn when a channel of ``cameras`` (the six nuScenes ones) is not in the sensor table: that view is missing
    from every sample, often because the camera is there under another name (which is never read)."""
    channels = [str(record.get('channel')) for record in sensors]
    is_camera = [record.get('modality') == 'camera' if 'modality' in record else channel.upper().startswith('CAM')
                 for record, channel in zip(sensors, channels)]
    unknown = sorted({channel for channel, camera in zip(channels, is_camera) if camera and channel not in cameras})
    absent = [channel for channel in cameras if channel not in channels]
    if not absent:
        return
    renames = _renames(unknown, absent)
    seen = f'camera channels {unknown}, which are not nuScenes channels, and ' if unknown else ''
    warnings.warn(f'{path} has {seen}no {absent}: the cameras {list(cameras)} are read by channel name, so every '
                  f'sample lacks the view(s) {absent}. Rename the channels in {path.name} to the nuScenes names '
                  f'(case-sensitive' + (f': {", ".join(renames)}' if renames else '') + '), or ignore this warning '
                  f'if the rig has no such camera.', UserWarning, stacklevel=3)


def check_categories(categories: Sequence[Mapping[str, Any]], path: Path, detection_of: Mapping[str, str]) -> None:
    """Warn when the category table names categories that nuScenes does not know: their boxes get no detection
    name, so they are left out of training and evaluation."""
    known = (*detection_of, *NON_DETECTION_CATEGORIES)
    unknown = sorted({str(record.get('name')) for record in categories} - set(known))
    if not unknown:
        return
    by_detection_name = {name: category for category, name in reversed(list(detection_of.items()))}
    renames = _renames(unknown, known, by_detection_name)
    warnings.warn(f'{path} has categories {unknown} that are not nuScenes categories: their boxes get no detection '
                  f'name and are left out of training and evaluation. Rename them to the nuScenes categories'
                  + (f' ({", ".join(renames)})' if renames else '') + f'; those with a detection name are '
                  f'{sorted(detection_of)}.', UserWarning, stacklevel=3)


def check_annotation_boxes(records: Sequence[Mapping[str, Any]], path: Path,
                           field: Callable[[Mapping[str, Any], str], Any], norm_tolerance: float) -> None:
    """Refuse annotations without a finite size > 0, a finite centre and a unit rotation (vectorised); ``field``
    reads a record's field (its error names a missing one)."""
    columns = {key: [field(record, key) for record in records] for key in ('size', 'translation', 'rotation')}
    try:
        sizes, centres, rotations = (np.array(columns[key], dtype=np.float64).reshape(len(records), width)
                                     for key, width in (('size', 3), ('translation', 3), ('rotation', 4)))
    except (ValueError, TypeError):
        raise ValueError(f'{path}: every annotation needs size (w, l, h) and translation (x, y, z) of 3 numbers '
                         f'and rotation (w, x, y, z) of 4; write the table again.') from None
    norms = np.linalg.norm(rotations, axis=1)
    bad = ~((sizes > 0) & np.isfinite(sizes)).all(1) | ~np.isfinite(centres).all(1) | ~(
        np.abs(norms - 1) <= norm_tolerance)
    if bad.any():
        record = records[int(np.flatnonzero(bad)[0])]
        raise ValueError(
            f'annotation {record["token"]} in {path} has size (w, l, h) = {record["size"]}, translation '
            f'{record["translation"]} and rotation {record["rotation"]} ({int(bad.sum())} such annotation(s)): a '
            f'3D box needs width, length and height > 0, a finite centre and a unit quaternion; fix or remove it.')
