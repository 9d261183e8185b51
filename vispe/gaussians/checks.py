"""What the Gaussian codecs refuse or warn about before they write a file that would decode to something other than
the scene: a centre grid coarser than the Gaussians (often one far outlier stretching the box), quantisation steps
that leave every attribute a single value, quaternions that quantise to zero, and values float16 cannot hold.

Each refusal is a ValueError, each warning a :class:`QuantisationWarning`; both name the value seen and the fix.
"""
from __future__ import annotations

import warnings

import numpy as np

from vispe.gaussians.layout import GRID_MAX, AttributeGroups

__all__ = ['QuantisationWarning', 'check_centre_grid', 'check_collapse', 'check_float16', 'check_rotations',
           'collapsed_groups']

FLOAT16_MAX = float(np.finfo(np.float16).max)
# The largest centre error (half a grid step) warned about, as a fraction of the median Gaussian's width.
GRID_TOLERANCE = 0.1
# A centre is an outlier when it lies beyond the 1st–99th percentile box widened by its own width on each side.
OUTLIER_PERCENTILES = (1.0, 99.0)


class QuantisationWarning(UserWarning):
    """Quantisation that loses more than the codec's steps suggest (a coarse centre grid, a collapsed group)."""


def check_centre_grid(xyz: np.ndarray, scale: np.ndarray) -> None:
    """Warn when the 16-bit centre grid moves centres by more than a tenth of the median Gaussian's width (the
    geometric mean of its three scales), naming the step, the Gaussians far outside the rest and the step without
    them."""
    low, high = xyz.min(0).astype(np.float64), xyz.max(0).astype(np.float64)
    step = float((high - low).max()) / GRID_MAX
    width = float(np.median(np.exp(scale.astype(np.float64).mean(1))))
    if step / 2 <= GRID_TOLERANCE * width:
        return
    lower, upper = np.percentile(xyz.astype(np.float64), OUTLIER_PERCENTILES, axis=0)
    margin = upper - lower
    inside = ((xyz >= lower - margin) & (xyz <= upper + margin)).all(1)
    outliers = int((~inside).sum())
    text = (f'the centres\' 16-bit grid has a step of {step:.4g} scene units (metres in a metric scene): the scene '
            f'box spans {(high - low).max():.4g} along its longest side, so each centre moves by up to '
            f'{step / 2:.4g}, more than a tenth of the median Gaussian\'s width {width:.4g}')
    if outliers and inside.any():
        rest = float(np.ptp(xyz[inside].astype(np.float64), axis=0).max())
        text += (f'. {outliers} Gaussian(s) lie far outside the rest (beyond the {OUTLIER_PERCENTILES[0]:g}th-'
                 f'{OUTLIER_PERCENTILES[1]:g}th percentile box widened by its width; first: index '
                 f'{np.nonzero(~inside)[0][0]}); without them the box is {rest:.4g} across, a step of '
                 f'{rest / GRID_MAX:.4g}: drop or crop the outliers before compressing.')
    else:
        text += '; the scene is too large for one 16-bit grid at this Gaussian size: split it into tiles.'
    warnings.warn(text, QuantisationWarning, stacklevel=3)


def collapsed_groups(attributes: np.ndarray, step: np.ndarray, groups: AttributeGroups) -> tuple[list[str], list[str]]:
    """The attribute groups that vary in ``attributes`` (N, W), and those of them whose varying columns all
    quantise to a single symbol at ``step`` ((W,) or (N, W)): (varying, collapsed)."""
    symbols = np.rint(attributes / step)
    varying_columns = np.ptp(attributes, axis=0) > 0
    flat_columns = symbols.min(0) == symbols.max(0)
    varying, collapsed = [], []
    for name, part in groups.slices().items():
        if varying_columns[part].any():
            varying.append(name)
            if flat_columns[part][varying_columns[part]].all():
                collapsed.append(name)
    return varying, collapsed


def check_collapse(attributes: np.ndarray, step: np.ndarray, groups: AttributeGroups, step_scale: float,
                   base_steps: dict[str, float], refuse_only: bool = False) -> None:
    """Refuse when every varying attribute group quantises to a single value at ``step`` (the file would hold the
    centres only); warn for each group that does when others do not (unless ``refuse_only``)."""
    varying, collapsed = collapsed_groups(attributes, step, groups)
    if not collapsed or (refuse_only and len(collapsed) < len(varying)):
        return
    slices = groups.slices()
    spans = {name: float(np.ptp(attributes[:, slices[name]], axis=0).max()) for name in collapsed}
    limits = {name: spans[name] / base_steps[name] for name in collapsed}
    detail = ', '.join(f'{name} spans {spans[name]:.4g} at step {base_steps[name] * step_scale:.4g}'
                       for name in collapsed)
    if len(collapsed) == len(varying):
        raise ValueError(f'step scale {step_scale:g} quantises every attribute to a single value ({detail}): the '
                         f'file would hold the centres only and every Gaussian would decode alike. Give a step scale '
                         f'below {min(limits.values()):.3g} (1 is the default).')
    warnings.warn(f'step scale {step_scale:g} quantises {", ".join(collapsed)} to a single value ({detail}): every '
                  f'Gaussian decodes with the same {collapsed[0]}. Give a step scale below '
                  f'{min(limits.values()):.3g} to keep them (1 is the default).', QuantisationWarning, stacklevel=3)


def check_rotations(decoded: np.ndarray, original: np.ndarray, index: np.ndarray, what: str) -> None:
    """Refuse when quaternions decode to zero (the decoder would refuse the scene): ``decoded`` and ``original``
    (N, 4) in coding order, ``index`` the Gaussians' indices in the input, ``what`` the quantisation."""
    zero = np.nonzero(~decoded.any(1))[0]
    if len(zero):
        first = zero[0]
        raise ValueError(f'{len(zero)} quaternion(s) decode to zero under {what} (first: Gaussian {index[first]}, '
                         f'{original[first].tolist()}), which is no rotation: normalise the quaternions first '
                         f'(cloud.rotation /= np.linalg.norm(cloud.rotation, axis=1, keepdims=True)) or use a '
                         f'smaller step scale.')


def check_float16(values: np.ndarray, names: list[str]) -> None:
    """Refuse values beyond float16's ±65504 (they would decode as infinite): ``values`` (N, len(names))."""
    too_large = np.abs(values) > FLOAT16_MAX
    if too_large.any():
        row, column = np.argwhere(too_large)[0]
        raise ValueError(f'the float16 codec cannot hold {int(too_large.any(1).sum())} Gaussian(s) (first: '
                         f'Gaussian {row}, {names[column]} = {values[row, column]:.6g}; float16 reaches '
                         f'±{FLOAT16_MAX:g}): use the factorized or triplane codec, or move the scene nearer the '
                         f'origin / into other units.')
