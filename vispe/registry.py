"""vispe's registries: children of mmengine's root registries, scope ``vispe``, plus plugin discovery.

Every mmengine root registry gets a ``vispe`` child, so a Runner with ``default_scope='vispe'`` finds
vispe's modules and falls back to mmengine's own without "Failed to search registry" warnings, and
configs of other OpenMMLab projects can say ``type='vispe.RoPEMixed'``.

``ENCODINGS`` is the registry encodings register into. It is the same object as ``MODELS``: mmengine
allows one child per scope under a root, and a second same-scope registry below ``MODELS`` would
break scope redirection inside the Runner (builds resolve to ``MODELS`` and fail). Encodings are
model components, as mmdet's positional encodings are; ``vispe.list_encodings`` tells them apart
from whole models by their base class.

Plugins: a package outside vispe registers its classes with ``@ENCODINGS.register_module()`` in a
module that is imported either through mmengine's ``custom_imports`` in a config, or through the
``vispe.plugins`` entry-point group, which vispe loads on the first registry lookup::

    [project.entry-points."vispe.plugins"]
    my_pe = "my_pkg.my_pe"
"""
from __future__ import annotations

import difflib
import importlib.metadata
import inspect
import re
import warnings
from typing import Any

import mmengine.registry as mm

from vispe import compat

compat.apply()

PLUGIN_GROUP = 'vispe.plugins'

_plugin_state: dict[str, Any] = {'loaded': False, 'failed': {}}


class UnknownTypeError(KeyError):
    """A config names a type that is not registered. The message lists the names and the closest."""

    def __str__(self) -> str:
        return str(self.args[0])


def load_plugins() -> dict[str, str]:
    """Import every module advertised in the ``vispe.plugins`` entry-point group (once).

    A plugin that fails to import does not break vispe: it is reported with a warning naming the
    entry point, and again in the error raised when one of its types is looked up.

    Returns:
        The entry points that failed, name -> error text.
    """
    if _plugin_state['loaded']:
        return _plugin_state['failed']
    _plugin_state['loaded'] = True
    for entry_point in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        try:
            entry_point.load()
        except Exception as exc:  # a third-party module may raise anything on import
            message = f'{type(exc).__name__}: {exc}'
            _plugin_state['failed'][entry_point.name] = message
            warnings.warn(
                f'vispe plugin {entry_point.name!r} ({entry_point.value}) failed to import: {message}. '
                f'Its types are unavailable; fix or uninstall the package that provides it.',
                stacklevel=2)
    return _plugin_state['failed']


def reload_plugins() -> dict[str, str]:
    """Scan the entry-point group again (after installing a plugin in a running process)."""
    _plugin_state['loaded'] = False
    _plugin_state['failed'] = {}
    return load_plugins()


def unknown_type_message(kind: str, name: str, known: list[str]) -> str:
    """The text of the error for an unregistered ``type``: the known names and the closest match."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    if not close:
        close = [k for k in known if k.lower() == name.lower()]
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ''
    failed = _plugin_state['failed']
    plugin_note = ''
    if failed:
        plugin_note = ' Plugins that failed to import: ' + '; '.join(f'{k} ({v})' for k, v in failed.items()) + '.'
    return (f'Unknown {kind} type {name!r}.{hint} Registered: {", ".join(sorted(known)) or "(none)"}. '
            f'A type from your own package must be imported first: add '
            f"custom_imports=dict(imports=['your_pkg.your_module']) to the config, or declare the module "
            f'in the {PLUGIN_GROUP!r} entry-point group.{plugin_note}')


def _signatures(built: Any) -> list[inspect.Signature]:
    """The signatures a call of ``built`` reaches: a function's own; for a class, its ``__init__`` and, while that
    passes ``**kwargs`` on, the ``__init__`` of each base class in the MRO (``object``'s excluded)."""
    if not inspect.isclass(built):
        return [inspect.signature(built)]
    signatures = []
    for cls in built.__mro__:
        if cls is object or '__init__' not in vars(cls):
            continue
        signatures.append(inspect.signature(vars(cls)['__init__']))
        if not any(p.kind is p.VAR_KEYWORD for p in signatures[-1].parameters.values()):
            break
    return signatures


def accepted_arguments(built: Any) -> tuple[list[str], bool]:
    """The keyword arguments ``built`` accepts, following ``**kwargs`` through base classes, and whether the last
    signature reached still passes unnamed keyword arguments on."""
    signatures = _signatures(built)
    accepted: list[str] = []
    for signature in signatures:
        accepted += [key for key, p in signature.parameters.items()
                     if key != 'self' and key not in accepted and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    passes_on = bool(signatures) and any(p.kind is p.VAR_KEYWORD for p in signatures[-1].parameters.values())
    return accepted, passes_on


def unknown_argument_error(exc: TypeError, built: Any) -> TypeError:
    """``exc`` itself, or, for a config key the built class or function does not take ("unexpected keyword
    argument"), an error naming the closest accepted argument and listing them (a class's own ``__init__`` and
    those of the base classes its ``**kwargs`` reach)."""
    match = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
    if match is None or built is None or not callable(built):
        return exc
    try:
        accepted, passes_on = accepted_arguments(built)
    except (TypeError, ValueError):
        return exc
    name = match.group(1)
    if name in accepted:
        return exc
    close = difflib.get_close_matches(name, accepted, n=2, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ''
    listing = ', '.join(accepted) or 'no named arguments'
    return TypeError(f'{getattr(built, "__name__", built)} has no argument {name!r} (a config key or cfg-option).'
                     f'{hint} It accepts: {listing}'
                     f'{" and the keyword arguments it passes on" if passes_on else ""}.')


class VispeRegistry(mm.Registry):
    """An mmengine ``Registry`` that also loads entry-point plugins and names the closest match."""

    def import_from_location(self) -> None:
        super().import_from_location()
        load_plugins()

    def build(self, cfg: Any, *args: Any, **kwargs: Any) -> Any:
        """Build in vispe's scope unless the config names one (``_scope_``), whatever default scope an
        earlier Runner left behind (mmengine would otherwise look in that scope's registry)."""
        if isinstance(cfg, dict) and '_scope_' not in cfg:
            cfg = type(cfg)({**cfg, '_scope_': self.scope})
        try:
            return super().build(cfg, *args, **kwargs)
        except TypeError as exc:
            raise unknown_argument_error(exc, self.get(cfg.get('type')) if isinstance(cfg, dict) else None) from None
        except KeyError as exc:
            type_name = cfg.get('type') if isinstance(cfg, dict) else None
            if isinstance(exc, UnknownTypeError) or not isinstance(type_name, str) or self.get(type_name) is not None:
                raise
            raise UnknownTypeError(unknown_type_message(self.name, type_name, list(self.module_dict))) from None


def _child(root: mm.Registry, *locations: str) -> VispeRegistry:
    return VispeRegistry(root.name, parent=root, scope='vispe', locations=list(locations))


MODELS = _child(mm.MODELS, 'vispe.encodings', 'vispe.models')
ENCODINGS = MODELS
DATASETS = _child(mm.DATASETS, 'vispe.datasets')
TRANSFORMS = _child(mm.TRANSFORMS, 'vispe.datasets')
METRICS = _child(mm.METRICS, 'vispe.evaluation')

RUNNERS = _child(mm.RUNNERS, 'vispe.engine')
RUNNER_CONSTRUCTORS = _child(mm.RUNNER_CONSTRUCTORS)
LOOPS = _child(mm.LOOPS, 'vispe.engine')
HOOKS = _child(mm.HOOKS, 'vispe.engine')
STRATEGIES = _child(mm.STRATEGIES)
DATA_SAMPLERS = _child(mm.DATA_SAMPLERS)
MODEL_WRAPPERS = _child(mm.MODEL_WRAPPERS, 'vispe.engine')
WEIGHT_INITIALIZERS = _child(mm.WEIGHT_INITIALIZERS)
OPTIMIZERS = _child(mm.OPTIMIZERS)
OPTIM_WRAPPERS = _child(mm.OPTIM_WRAPPERS)
OPTIM_WRAPPER_CONSTRUCTORS = _child(mm.OPTIM_WRAPPER_CONSTRUCTORS)
PARAM_SCHEDULERS = _child(mm.PARAM_SCHEDULERS)
EVALUATOR = _child(mm.EVALUATOR)
TASK_UTILS = _child(mm.TASK_UTILS)
VISUALIZERS = _child(mm.VISUALIZERS)
VISBACKENDS = _child(mm.VISBACKENDS)
LOG_PROCESSORS = _child(mm.LOG_PROCESSORS)
INFERENCERS = _child(mm.INFERENCERS)
FUNCTIONS = _child(mm.FUNCTIONS)
