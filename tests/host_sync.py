"""A CPU stand-in for ``torch.cuda.set_sync_debug_mode('error')``: inside :func:`as_on_a_gpu`, vispe treats CPU
tensors as it treats a GPU's (its value checks skip them, as :func:`vispe.geometry.checks.checking_values` does off
the host) and every Python-level read of a tensor's values raises :class:`HostRead`: ``bool``/``int``/``float`` of
a tensor, ``item``, ``tolist``, ``numpy``, ``cpu``, ``nonzero``. On a GPU each of these would make the host wait for
the device. Reads inside torch's C++ (boolean-mask indexing, ``torch.unique``) are not seen; the CUDA suite
(tests/cuda, ``make gpu-check``) sees those."""
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


@contextlib.contextmanager
def as_on_a_gpu() -> Iterator[None]:
    """Run the block as a forward on a GPU would: value checks skip the tensors, any read-back raises."""
    saved = {name: getattr(torch.Tensor, name) for name in READS}
    saved_nonzero, saved_hosts = torch.nonzero, checks.HOST_DEVICES
    checks.HOST_DEVICES = frozenset()
    try:
        for name in READS:
            setattr(torch.Tensor, name, _refuse(name))
        torch.nonzero = _refuse('nonzero')
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)
        torch.nonzero, checks.HOST_DEVICES = saved_nonzero, saved_hosts
