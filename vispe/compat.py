"""Compatibility of mmengine 0.10.7 with today's torch and setuptools (fixed on mmengine main, unreleased).

Two breakages, measured in ../shared/reference/ecosystem.md (B3):

1. torch >= 2.6 loads with ``weights_only=True`` by default, so mmengine's Runner cannot resume
   (its checkpoints pickle a ``HistoryBuffer`` and numpy state). vispe keeps ``weights_only=True``
   for every checkpoint from elsewhere (``load_from``, ``vispe.load_checkpoint``) and uses the full
   unpickler only inside :func:`trusted_checkpoints`, which ``Runner.resume`` enters: a resume file
   is the user's own.
2. setuptools >= 82 ships no ``pkg_resources``; mmengine's ``is_installed``/``get_installed_path``
   import it, which breaks ``_base_ = 'pkg::...'`` and absolute ``read_base()`` imports. They are
   replaced by ``importlib`` equivalents where ``pkg_resources`` is missing.
3. mmengine's PyTorch launcher calls ``torch.cuda.set_device`` unconditionally, so DDP on CPU (gloo)
   fails without a GPU; on a machine without CUDA the process group is initialised directly.

:func:`apply` is idempotent and runs when ``vispe.registry`` is imported.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.metadata
import importlib.util
import os.path as osp
import pickle
from typing import Any, Callable, Iterator

import torch

_TRUSTED = contextvars.ContextVar('vispe_trusted_checkpoints', default=False)
_applied = False


@contextlib.contextmanager
def trusted_checkpoints() -> Iterator[None]:
    """Within this block, local checkpoints load with the full unpickler (only for your own files)."""
    token = _TRUSTED.set(True)
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def torch_load(path: str, map_location: Any = 'cpu', weights_only: bool | None = None) -> Any:
    """``torch.load`` with vispe's policy: ``weights_only`` unless trusted, and errors that say why.

    Args:
        path: a local file.
        map_location: as in ``torch.load``.
        weights_only: force a mode; ``None`` follows :func:`trusted_checkpoints`.
    """
    if weights_only is None:
        weights_only = not _TRUSTED.get()
    try:
        return torch.load(path, map_location=map_location, weights_only=weights_only)
    except FileNotFoundError:
        raise FileNotFoundError(f'Checkpoint not found: {path}') from None
    except pickle.UnpicklingError as exc:
        if weights_only and 'Weights only load failed' in str(exc):
            first = str(exc).strip().splitlines()[0]
            raise pickle.UnpicklingError(
                f'{path} holds pickled Python objects that weights-only loading refuses ({first}). '
                f'vispe loads checkpoints from elsewhere with weights_only=True. If this is your own '
                f'training run, resume from it (tools/train.py --resume) or load it with '
                f'vispe.load_checkpoint(model, path, weights_only=False).') from None
        raise RuntimeError(f'Checkpoint {path} is corrupt or not a torch file: {exc}') from None
    except (RuntimeError, EOFError, OSError) as exc:
        raise RuntimeError(f'Checkpoint {path} is corrupt or truncated: {exc}') from None


def _load_from_local(filename: str, map_location: Any) -> Any:
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    return torch_load(filename, map_location=map_location)


def _trusted_resume(resume: Callable) -> Callable:
    @functools.wraps(resume)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with trusted_checkpoints():
            return resume(self, *args, **kwargs)
    wrapper.__vispe_patched__ = True
    return wrapper


def _is_installed(package: str) -> bool:
    try:
        importlib.metadata.distribution(package)
        return True
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        return spec is not None and spec.origin is not None


def _get_installed_path(package: str) -> str:
    spec = importlib.util.find_spec(package.replace('-', '_'))
    if spec is None or spec.origin is None:
        try:
            importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            raise importlib.metadata.PackageNotFoundError(f'{package} is not installed') from None
        from mmengine.utils.package_utils import package2module
        spec = importlib.util.find_spec(package2module(package))
        if spec is None or spec.origin is None:
            raise RuntimeError(f'{package} is a namespace package, which is invalid for `get_installed_path`')
    return osp.dirname(spec.origin)


def _init_dist_pytorch_cpu(backend: str, init_backend: str = 'torch', **kwargs: Any) -> None:
    if init_backend != 'torch':
        raise RuntimeError(f'Distributed init backend {init_backend!r} needs CUDA; on the CPU use the torch backend '
                           f'(gloo).')
    torch.distributed.init_process_group(backend=backend, **kwargs)


def _has_pkg_resources() -> bool:
    return importlib.util.find_spec('pkg_resources') is not None


def apply() -> None:
    """Install the fixes into mmengine (idempotent)."""
    global _applied
    if _applied:
        return
    from mmengine.runner import Runner
    from mmengine.runner.checkpoint import CheckpointLoader

    CheckpointLoader.register_scheme(prefixes='', loader=_load_from_local, force=True)
    if not getattr(Runner.resume, '__vispe_patched__', False):
        Runner.resume = _trusted_resume(Runner.resume)

    if not torch.cuda.is_available():
        import mmengine.dist.utils as dist_utils
        dist_utils._init_dist_pytorch = _init_dist_pytorch_cpu

    if not _has_pkg_resources():
        import mmengine.config.config as config_module
        import mmengine.hub.hub as hub_module
        import mmengine.utils as utils_module
        import mmengine.utils.package_utils as package_utils

        for module in (config_module, hub_module, utils_module, package_utils):
            if hasattr(module, 'is_installed'):
                module.is_installed = _is_installed
            if hasattr(module, 'get_installed_path'):
                module.get_installed_path = _get_installed_path
    _applied = True
