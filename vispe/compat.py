"""What vispe changes in mmengine 0.10.7 to run on today's torch and setuptools, each change listed.

``import vispe`` applies the patches in :data:`PATCHES` whose problem the installed mmengine still
has on this machine (each one's ``still_broken`` probe reads mmengine's own code), and only those:

* ``package_helpers`` — mmengine's ``is_installed``/``get_installed_path`` import ``pkg_resources``,
  which setuptools >= 82 no longer ships, so ``_base_ = 'pkg::...'`` and absolute ``read_base()``
  imports fail. They are replaced by ``importlib`` equivalents (fixed on mmengine main, unreleased).
* ``cpu_process_group`` — mmengine's PyTorch launcher calls ``torch.cuda.set_device`` whatever the
  backend, so DDP on CPU processes (gloo) fails on a machine without CUDA; there the process group
  is initialised directly. Machines with CUDA keep mmengine's launcher.
* ``package_config_files`` — ``Config.fromfile`` reads its argument as a path, while mmengine resolves
  ``pkg::path`` only in ``_base_`` and ``mmengine.hub.get_config``; ``Config.fromfile('vispe::<path>')``
  is given the packaged config's file (:func:`vispe.configs.resolve_config`). Other names pass unchanged.

vispe also registers itself in mmengine's table of packages with configs (``MODULE2PACKAGE``), which
``_base_ = 'vispe::...'`` and ``mmengine.hub.get_config('vispe::...')`` require (:func:`register_package`).

Nothing about checkpoints is patched: mmengine's own loaders keep torch's defaults in every runner.
vispe's runner (:class:`vispe.engine.Runner`) reads its files through :mod:`vispe.serialization`
instead, so a user's own mmengine Runner in the same process is never given vispe's policy.

``vispe.compat.applied()`` names the patches in force; the tests fail when the installed mmengine
no longer needs one, so that it is removed.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import os.path as osp
from dataclasses import dataclass
from typing import Any, Callable

import torch

MMENGINE_VERSION = '0.10.7'


@dataclass(frozen=True)
class Patch:
    """One change to mmengine.

    Attributes:
        name: short name.
        targets: the mmengine attributes replaced ('module:attribute').
        reason: what breaks without it.
        still_broken: reads the unpatched mmengine code: True while it still has the problem.
        affects_here: True where this machine meets the problem (e.g. no CUDA, no pkg_resources).
        install: replaces the targets.
    """

    name: str
    targets: tuple[str, ...]
    reason: str
    still_broken: Callable[[], bool]
    affects_here: Callable[[], bool]
    install: Callable[[], None]

    def needed(self) -> bool:
        return self.still_broken() and self.affects_here()


_ORIGINALS: dict[str, Any] = {}
_applied: list[str] = []


def original(target: str) -> Any:
    """mmengine's own version of ``'module:attribute'``, as it was before vispe patched it."""
    if target in _ORIGINALS:
        return _ORIGINALS[target]
    return current(target)


def current(target: str) -> Any:
    """The object ``'module:attribute'`` (or ``'module:Class.method'``) names now."""
    module_name, attribute = target.split(':')
    found: Any = importlib.import_module(module_name)
    for name in attribute.split('.'):
        found = getattr(found, name)
    return found


def _replace(target: str, replacement: Any) -> None:
    """Set ``'module:attribute'`` or ``'module:Class.method'`` (a static method stays static)."""
    module_name, attribute = target.split(':')
    owner: Any = importlib.import_module(module_name)
    *path, attribute = attribute.split('.')
    for name in path:
        owner = getattr(owner, name)
    _ORIGINALS.setdefault(target, getattr(owner, attribute))
    if isinstance(inspect.getattr_static(owner, attribute), staticmethod):
        replacement = staticmethod(replacement)
    setattr(owner, attribute, replacement)


def _source(target: str) -> str:
    return inspect.getsource(original(target))


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


PACKAGE_HELPER_TARGETS = (
    'mmengine.utils.package_utils:is_installed', 'mmengine.utils.package_utils:get_installed_path',
    'mmengine.utils:is_installed', 'mmengine.utils:get_installed_path',
    'mmengine.config.config:is_installed', 'mmengine.config.config:get_installed_path',
    'mmengine.hub.hub:get_installed_path',
)


def _package_helpers_broken() -> bool:
    return 'pkg_resources' in _source('mmengine.utils.package_utils:is_installed')


def _no_pkg_resources() -> bool:
    return importlib.util.find_spec('pkg_resources') is None


def _install_package_helpers() -> None:
    for target in PACKAGE_HELPER_TARGETS:  # import every module first: some import the helpers from others
        importlib.import_module(target.split(':')[0])
    for target in PACKAGE_HELPER_TARGETS:
        _replace(target, _get_installed_path if target.endswith(':get_installed_path') else _is_installed)


def _init_dist_pytorch_cpu(backend: str, init_backend: str = 'torch', **kwargs: Any) -> None:
    if init_backend != 'torch':
        raise RuntimeError(f'Distributed init backend {init_backend!r} needs CUDA; on the CPU use the torch backend '
                           f'(gloo).')
    torch.distributed.init_process_group(backend=backend, **kwargs)


def _cpu_process_group_broken() -> bool:
    return 'torch.cuda.set_device' in _source('mmengine.dist.utils:_init_dist_pytorch')


def _no_cuda() -> bool:
    return not torch.cuda.is_available()


def _fromfile_resolving_vispe(filename: Any, *args: Any, **kwargs: Any) -> Any:
    from vispe.configs import PREFIX, resolve_config
    if isinstance(filename, str) and filename.startswith(PREFIX):
        filename = str(resolve_config(filename))
    return original('mmengine.config.config:Config.fromfile')(filename, *args, **kwargs)


def _fromfile_reads_paths_only() -> bool:
    return '::' not in _source('mmengine.config.config:Config.fromfile')


PATCHES: tuple[Patch, ...] = (
    Patch('package_helpers', PACKAGE_HELPER_TARGETS,
          'mmengine imports pkg_resources, gone from setuptools >= 82: package configs (pkg::) fail to load.',
          _package_helpers_broken, _no_pkg_resources, _install_package_helpers),
    Patch('cpu_process_group', ('mmengine.dist.utils:_init_dist_pytorch',),
          'mmengine calls torch.cuda.set_device in its PyTorch launcher: DDP on CPU processes fails without CUDA.',
          _cpu_process_group_broken, _no_cuda, lambda: _replace('mmengine.dist.utils:_init_dist_pytorch', _init_dist_pytorch_cpu)),
    Patch('package_config_files', ('mmengine.config.config:Config.fromfile',),
          "Config.fromfile reads its argument as a path: Config.fromfile('vispe::vit/...') fails.",
          _fromfile_reads_paths_only, lambda: True,
          lambda: _replace('mmengine.config.config:Config.fromfile', _fromfile_resolving_vispe)),
)


def register_package() -> None:
    """Name vispe in mmengine's table of packages with configs (``mmengine.config.utils.MODULE2PACKAGE``),
    which mmengine asserts before it resolves a ``vispe::`` name (idempotent)."""
    from mmengine.config.utils import MODULE2PACKAGE
    MODULE2PACKAGE.setdefault('vispe', 'vispe')


def apply() -> list[str]:
    """Install the patches the installed mmengine needs and register vispe's configs (idempotent); returns the
    patches' names."""
    register_package()
    for patch in PATCHES:
        if patch.name not in _applied and patch.needed():
            patch.install()
            _applied.append(patch.name)
    return applied()


def applied() -> list[str]:
    """The names of the patches in force in this process."""
    return list(_applied)
