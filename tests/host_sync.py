"""A CPU stand-in for ``torch.cuda.set_sync_debug_mode('error')``: inside :func:`as_on_a_gpu`, vispe treats CPU
tensors as it treats a GPU's (its value checks skip them, as :func:`vispe.geometry.checks.checking_values` does off
the host) and every Python-level read of a tensor's values raises :class:`HostRead` (``bool``/``int``/``float`` of
a tensor, ``item``, ``tolist``, ``numpy``, ``cpu``, ``nonzero``), as does every tensor made from Python data for a
device (``new_tensor``, ``torch.tensor``/``torch.as_tensor`` with ``device=``: on a GPU a copy from pageable host
memory, which waits too). Reads inside torch's C++ (boolean-mask indexing, ``torch.unique``) and ``.to(device)`` of
host tensors are not seen; the CUDA suite (tests/cuda, ``make gpu-check``) sees those."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

import vispe.geometry.checks as checks

READS = ('__bool__', '__int__', '__float__', '__index__', 'item', 'tolist', 'numpy', 'cpu', 'nonzero')


class HostRead(AssertionError):
    """A forward read a tensor's values back to Python (a host sync on a GPU)."""


def _refuse(name: str):
    def read(self, *args, **kwargs):
        raise HostRead(f'Tensor.{name} read a {tuple(self.shape)} tensor back to the host during the forward')
    return read


def _refuse_device_copy(name: str, make):
    def copy(data, *args, **kwargs):
        if kwargs.get('device') is not None:
            raise HostRead(f'torch.{name}(..., device=...) copied host data to the device during the forward')
        return make(data, *args, **kwargs)
    return copy


def _refuse_new_tensor(self, *args, **kwargs):
    raise HostRead('Tensor.new_tensor copied host data to the device during the forward')


@contextlib.contextmanager
def as_on_a_gpu() -> Iterator[None]:
    """Run the block as a forward on a GPU would: value checks skip the tensors, any read-back raises."""
    saved = {name: getattr(torch.Tensor, name) for name in (*READS, 'new_tensor')}
    saved_functions = {name: getattr(torch, name) for name in ('nonzero', 'tensor', 'as_tensor')}
    saved_hosts = checks.HOST_DEVICES
    checks.HOST_DEVICES = frozenset()
    try:
        for name in READS:
            setattr(torch.Tensor, name, _refuse(name))
        torch.Tensor.new_tensor = _refuse_new_tensor
        torch.nonzero = _refuse('nonzero')
        for name in ('tensor', 'as_tensor'):
            setattr(torch, name, _refuse_device_copy(name, saved_functions[name]))
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)
        for name, function in saved_functions.items():
            setattr(torch, name, function)
        checks.HOST_DEVICES = saved_hosts
