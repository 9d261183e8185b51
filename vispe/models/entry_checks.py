"""Where a batch enters a model: its values checked on the host, before they move to a GPU.

A forward on a GPU skips the value checks that would read tensors back (:func:`vispe.geometry.checks.checking_values`,
so the GPU never waits for the host); :class:`CheckedDataPreprocessor`, the data preprocessor of vispe's models,
runs them where the batch is still in host memory, so a NaN pixel or point from the data pipeline still stops the
run with a clear error. (Masks are made by the collate functions, and ``multiview_collate`` checks the cameras of a
batch on the host.) The setting is the preprocessor's own, ``model.data_preprocessor.nonfinite_inputs``: a model
passes its ``nonfinite_inputs`` at build.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from mmengine.model import BaseDataPreprocessor

from vispe.geometry.checks import on_host
from vispe.models.inputs import check_finite, check_nonfinite_option
from vispe.registry import MODELS

__all__ = ['CheckedDataPreprocessor', 'check_finite_entry', 'entry_checks']


def check_finite_entry(inputs: torch.Tensor | Sequence | Mapping, nonfinite: str, device: torch.device) -> None:
    """Raise, warn or do nothing (``nonfinite``) when the floating-point host tensors of a batch's ``inputs`` (a
    tensor, a list of per-sample tensors or a dict of them, e.g. V-DETR's ``dict(points=...)``), about to move to
    ``device``, hold NaN or ±inf."""
    if isinstance(inputs, torch.Tensor):
        tensors = {None: inputs}
    elif isinstance(inputs, Mapping):
        tensors = {f'inputs[{key!r}]': value for key, value in inputs.items()}
    else:
        tensors = {f'sample {index}': value for index, value in enumerate(inputs)}
    for name, tensor in tensors.items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.device.type == 'cpu':
            check_finite(tensor, nonfinite, entering=device, where=name)


@MODELS.register_module()
class CheckedDataPreprocessor(BaseDataPreprocessor):
    """mmengine's :class:`~mmengine.model.BaseDataPreprocessor` (it moves the batch to the model's device) that first
    checks the batch's ``inputs`` for NaN and ±inf (``nonfinite_inputs``: 'raise', 'warn' or 'ignore') when the
    model's device is not the host: there the forward no longer checks them. On the CPU the forward's own checks run.

    Args:
        nonfinite_inputs: as the model's (vispe's models pass theirs).
        non_blocking: as mmengine's.
    """

    def __init__(self, nonfinite_inputs: str = 'raise', non_blocking: bool = False) -> None:
        super().__init__(non_blocking=non_blocking)
        self.nonfinite_inputs = check_nonfinite_option(nonfinite_inputs)

    def forward(self, data: dict, training: bool = False) -> dict | list:
        if not on_host(self.device) and self.device.type != 'meta' and isinstance(data, dict) and 'inputs' in data:
            check_finite_entry(data['inputs'], self.nonfinite_inputs, self.device)
        return super().forward(data, training)


def entry_checks(nonfinite_inputs: str = 'raise') -> dict:
    """The config of vispe's models' default data preprocessor, :class:`CheckedDataPreprocessor`."""
    return dict(type='vispe.CheckedDataPreprocessor', nonfinite_inputs=nonfinite_inputs)
