"""Checks of the image batches (and DETR's pixel masks) that vispe's models receive.

Each check runs before the model does any work and raises a built-in exception whose message says
what is wrong, the value seen and how to fix it, instead of a convolution's dtype error or a silent
NaN. Metadata checks (type, rank, shape, device, dtype) cost nothing; the value checks are one reduction each
(``torch.isfinite(x).all()`` for the pixels, one for a mask's layout) and are skipped while tracing or
compiling, where a data-dependent branch would break the graph, and on the meta device.
"""
from __future__ import annotations

import warnings

import torch

from vispe.geometry.checks import check_choice, checking_values, tracing

NONFINITE_OPTIONS = ('raise', 'warn', 'ignore')
AUTOCAST_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_nonfinite_option(value: str) -> str:
    """``value`` if it is one of :data:`NONFINITE_OPTIONS`, else a ValueError naming the closest."""
    return check_choice('nonfinite_inputs', value, NONFINITE_OPTIONS)


def value_checks_enabled(x: torch.Tensor) -> bool:
    """False while tracing or compiling (no data-dependent branches there) and for meta tensors: the geometry's
    rule (:func:`vispe.geometry.checks.checking_values`), so images and geometry are checked in the same places."""
    return checking_values(x)


def _autocast_enabled(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except RuntimeError:  # a device type autocast does not know
        return False


def check_device(x: torch.Tensor, parameter: torch.Tensor | None) -> None:
    """The images must be on the device of the model's ``parameter``."""
    if parameter is not None and x.device != parameter.device:
        raise ValueError(f'Images are on {x.device} but the model\'s parameters on {parameter.device}. Move the '
                         f'images with x.to({str(parameter.device)!r}) (or the model with '
                         f'model.to({str(x.device)!r})).')


def check_dtype(x: torch.Tensor, param_dtype: torch.dtype | None) -> None:
    """Integer images must be converted and normalised; a float dtype must match the parameters'
    (``param_dtype``) unless autocast casts it (float32, float16 and bfloat16 inside ``torch.autocast``)."""
    if x.dtype == torch.bool or not (x.is_floating_point() or x.is_complex()):
        raise TypeError(f'Images must be floating point; got {x.dtype}. Convert to float and normalise, e.g. '
                        f'x.float() / 255 then subtract the dataset mean and divide by its std (what the '
                        f'datasets\' pipelines do).')
    if x.is_complex():
        raise TypeError(f'Images must be real floating point; got {x.dtype}. Pass x.real or x.abs().')
    if param_dtype is None or x.dtype == param_dtype:
        return
    if x.dtype in AUTOCAST_DTYPES and _autocast_enabled(x.device.type):
        return
    half = param_dtype if param_dtype in (torch.float16, torch.bfloat16) else x.dtype
    autocast = (f', or run the model under torch.autocast({x.device.type!r}, dtype={half}) for mixed precision'
                if x.dtype in AUTOCAST_DTYPES and half in (torch.float16, torch.bfloat16) else '')
    raise TypeError(f'Images are {x.dtype} but the model\'s parameters are {param_dtype}. Cast the input '
                    f'(x.to({param_dtype})) or the model (model.to({x.dtype})){autocast}.')


def check_finite(x: torch.Tensor, nonfinite: str, entering: torch.device | None = None,
                 where: str | None = None) -> None:
    """Raise, warn or do nothing (``nonfinite``) when ``x`` holds NaN or ±inf; one reduction when clean.
    ``entering``: the device a batch's inputs are about to move to (the data preprocessor's check; the batch is in
    host memory then, so it is checked unless traced), named in the message instead of the images; ``where``: which
    of the inputs ``x`` is (default: a batch, whose first bad sample is named)."""
    checked = value_checks_enabled(x) if entering is None else not tracing()
    if check_nonfinite_option(nonfinite) == 'ignore' or not checked:
        return
    if bool(torch.isfinite(x).all()):
        return
    nan, inf = int(torch.isnan(x).sum()), int(torch.isinf(x).sum())
    if where is None:
        where = f'sample {int(torch.nonzero(~torch.isfinite(x).flatten(1).all(1))[0, 0])}' if x.ndim > 1 else 'batch'
    what = (f'The batch\'s inputs hold {nan} NaN and {inf} infinite values (the first in {where}), found where the '
            f'batch enters the model (before it moves to {entering})' if entering is not None else
            f'The images hold {nan} NaN and {inf} infinite pixel values (the first in image '
            f'{where.removeprefix("sample ")} of the batch)')
    attribute = 'model.data_preprocessor.nonfinite_inputs' if entering is not None else 'model.nonfinite_inputs'
    message = (f'{what}; the model would output NaN. Check the data pipeline (a zero std in the normalisation, a '
               f'corrupt file, values beyond the float16 range), or build the model with '
               f'nonfinite_inputs=\'warn\' or \'ignore\' (also an attribute: {attribute}).')
    if nonfinite == 'raise':
        raise ValueError(message)
    warnings.warn(message, RuntimeWarning, stacklevel=4)


def check_image_batch(x: torch.Tensor, in_chans: int | None, parameter: torch.Tensor | None,
                      nonfinite: str = 'raise', min_side: int = 1, min_side_reason: str = '',
                      channels_fix: str = '') -> None:
    """Check a batch of images (B, C, H, W) before a model runs on it.

    Args:
        x: the batch.
        in_chans: the channels the model expects (None: any).
        parameter: the model's first parameter, whose device and dtype the images must have (None: any).
        nonfinite: 'raise', 'warn' or 'ignore' for NaN and ±inf pixels.
        min_side: the smallest height and width the model takes (e.g. a stride); ``min_side_reason`` says why.
        channels_fix: the second fix offered for a wrong channel count, formatted with ``channels``
            (the count seen), e.g. ``', or build the model with in_chans={channels}'``.

    Raises:
        TypeError: not a tensor, or a dtype the model cannot take.
        ValueError: rank, channels, an empty batch or image, another device than the model's, or non-finite
            pixels (``nonfinite='raise'``).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f'Expected a batch of images as a torch.Tensor (B, C, H, W); got {type(x).__name__}. '
                        f'Convert it with torch.as_tensor(...).')
    if x.ndim != 4:
        fix = ('Add a batch dimension with x.unsqueeze(0) for a single image.' if x.ndim == 3 else
               'Pass one 4-D batch (B, C, H, W); stack single images with torch.stack.')
        raise ValueError(f'Expected a batch of images (B, C, H, W); got shape {tuple(x.shape)}. {fix}')
    batch, channels, height, width = x.shape
    if in_chans is not None and channels != in_chans:
        fix = (' The shape looks channels-last (B, H, W, C): use x.permute(0, 3, 1, 2).' if width == in_chans else
               f' Convert the images{channels_fix.format(channels=channels)}.')
        raise ValueError(f'Expected {in_chans} channels (in_chans={in_chans}); got {channels} in shape '
                         f'{tuple(x.shape)}.{fix}')
    if batch == 0:
        raise ValueError(f'Empty batch: shape {tuple(x.shape)} holds no image. Skip empty batches before the model '
                         f'(e.g. a sampler or filter that never yields them).')
    if height == 0 or width == 0:
        raise ValueError(f'Empty images: shape {tuple(x.shape)} has no pixel (size {height}x{width}). Check the '
                         f'crop or resize that made them, or drop such images before the model.')
    if height < min_side or width < min_side:
        raise ValueError(f'Image size {height}x{width} is too small: {min_side_reason}. Resize the images to at '
                         f'least {min_side} px a side.')
    check_device(x, parameter)
    check_dtype(x, None if parameter is None else parameter.dtype)
    check_finite(x, nonfinite)


def check_pixel_masks(masks: torch.Tensor | None, images: torch.Tensor) -> None:
    """Check DETR's pixel masks (B, H, W): bool, True on the real pixels, each image's real pixels the
    non-empty top-left rectangle that padding at the bottom and right leaves (``vispe.detr_collate``).

    Raises:
        TypeError: not a bool tensor.
        ValueError: shape or device do not match ``images``, an image without real pixels (DETR's original
            convention, True = padding), or real pixels that are not a top-left rectangle.
    """
    if masks is None:
        return
    if not isinstance(masks, torch.Tensor):
        raise TypeError(f'masks must be a bool tensor (B, H, W); got {type(masks).__name__}.')
    if masks.dtype != torch.bool:
        raise TypeError(f'masks must be bool, True on real pixels; got {masks.dtype}. Convert a 0/1 mask with '
                        f'masks.bool() (1 = real pixel).')
    expected = (images.shape[0], *images.shape[-2:])
    if tuple(masks.shape) != expected:
        raise ValueError(f'masks must have shape (B, H, W) = {expected} to match the images {tuple(images.shape)}; '
                         f'got {tuple(masks.shape)}. Pass the masks that vispe.detr_collate returns with the batch.')
    if masks.device != images.device:
        raise ValueError(f'masks are on {masks.device} but the images on {images.device}: move them with '
                         f'masks.to(images.device).')
    if not value_checks_enabled(masks):
        return
    rows, cols = masks.any(2).sum(1), masks.any(1).sum(1)
    rectangle = ((torch.arange(masks.shape[1], device=masks.device) < rows[:, None])[:, :, None]
                 & (torch.arange(masks.shape[2], device=masks.device) < cols[:, None])[:, None, :])
    good = (masks == rectangle).flatten(1).all(1) & (rows > 0)
    if bool(good.all()):
        return
    index = int(torch.nonzero(~good)[0, 0])
    convention = ('vispe\'s masks are True on real pixels; DETR\'s original code uses True = padding, so pass '
                  '~mask if yours comes from there')
    if rows[index] == 0:
        raise ValueError(f'masks[{index}] has no True pixel, so image {index} of the batch would be predicted from '
                         f'nothing: {convention}.')
    inverted = ~masks[index]
    inverted_rows, inverted_cols = int(inverted.any(1).sum()), int(inverted.any(0).sum())
    if inverted_rows and bool(inverted[:inverted_rows, :inverted_cols].all()) \
            and int(inverted.sum()) == inverted_rows * inverted_cols:
        raise ValueError(f'masks[{index}] is True on the bottom or right border and False on a top-left '
                         f'rectangle: {convention}.')
    raise ValueError(f'masks[{index}] is True on {int(masks[index].sum())} pixels that are not a top-left '
                     f'rectangle; images must sit in the top-left corner, padded at the bottom and right '
                     f'(vispe.detr_collate), with the mask True on the real pixels.')
