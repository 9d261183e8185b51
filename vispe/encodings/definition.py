"""What :class:`~vispe.encodings.PositionEncoding` checks of an encoding class when it is defined and when it is built.

* Hook signatures, by parameter name: a hook written for vispe 0.1, with one ``pos`` where it now receives the
  query-side and the key-side positions, is refused at class definition with the signature to write; a
  ``transform_out`` that leaves out the optional ``probs`` or ``pos_k`` is called with only what it names.
* Constructor arguments: the outermost ``__init__`` checks every argument declared in the class's ``options``
  (:mod:`vispe.encodings.options`) before the constructor runs, and marks the instance built when it returns.
"""
from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable

from vispe.encodings.options import OptionTypeError, closest_suggestion

if TYPE_CHECKING:
    from vispe.encodings.base import PositionEncoding

# Parameters (after self) of each attention hook; pos_q / pos_k replaced vispe 0.1's one ``pos`` in the first three.
HOOK_SIGNATURES = {
    'rotate': ('q', 'k', 'pos_q', 'pos_k', 'layer_idx'),
    'logits_bias': ('q', 'k', 'pos_q', 'pos_k', 'layer_idx'),
    'transform_out': ('out', 'pos_q', 'layer_idx', 'probs', 'pos_k'),
    'transform_v': ('v', 'pos_k', 'layer_idx'),
}
ONE_POSITION_HOOKS = ('rotate', 'logits_bias', 'transform_out')
# transform_out's parameters a hook may leave out (it is then called without them).
OPTIONAL_TRANSFORM_OUT = ('probs', 'pos_k')

# Instance-dict flags: inside the outermost constructor; construction finished (assignments checked).
CONSTRUCTING = '_options_constructing'
BUILT = '_options_built'


def _parameters(method: Callable[..., Any]) -> list[inspect.Parameter] | None:
    """The parameters after ``self``, or None for a method taking ``*args`` or ``**kwargs`` (not checked)."""
    parameters = list(inspect.signature(method).parameters.values())[1:]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return None
    return parameters


def refuse_one_position_hooks(cls: type) -> None:
    """A hook of vispe 0.1 (a parameter named ``pos`` and none named ``pos_q`` or ``pos_k``) gets a TypeError at class
    definition that names the signature to write, rather than wrong positions at the first forward."""
    for hook in ONE_POSITION_HOOKS:
        method = cls.__dict__.get(hook)
        parameters = None if method is None else _parameters(method)
        if parameters is None:
            continue
        names = [p.name for p in parameters]
        if 'pos' in names and not {'pos_q', 'pos_k'} & set(names):
            raise TypeError(f'{cls.__name__}.{hook}(self, {", ".join(names)}) has the one-position signature of vispe '
                            f'0.1. Hooks now receive the query-side and the key-side positions: write '
                            f'{hook}(self, {", ".join(HOOK_SIGNATURES[hook])}); in self-attention pos_q is pos_k (see '
                            f'docs/architecture.md).')


def fit_transform_out(cls: type) -> None:
    """Let a ``transform_out`` leave out ``probs`` or ``pos_k``: the class gets a method of the full signature that
    passes on only the parameters the hook names."""
    method = cls.__dict__.get('transform_out')
    parameters = None if method is None else _parameters(method)
    if parameters is None:
        return
    names = {p.name for p in parameters}
    taken = tuple(name for name in OPTIONAL_TRANSFORM_OUT if name in names)
    if len(taken) == len(OPTIONAL_TRANSFORM_OUT):
        return

    @functools.wraps(method)
    def transform_out(self: PositionEncoding, out: Any, pos_q: Any, layer_idx: int, probs: Any = None,
                      pos_k: Any = None) -> Any:
        given = {'probs': probs, 'pos_k': pos_k}
        return method(self, out, pos_q, layer_idx, **{name: given[name] for name in taken})

    cls.transform_out = transform_out


def checked_arguments(cls: type[PositionEncoding], signature: inspect.Signature, instance: PositionEncoding,
                      args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The constructor arguments (defaults included) with every option declared in ``cls.options``
    checked and normalised; unknown keyword arguments are refused with the closest option name."""
    try:
        bound = signature.bind(instance, *args, **kwargs)
    except TypeError:
        accepted = [name for name in signature.parameters if name != 'self']
        unknown = [name for name in kwargs if name not in signature.parameters]
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            accepts = f'It accepts: {", ".join(accepted)}.' if accepted else 'It takes no options.'
            raise OptionTypeError(f'{cls.__name__} has no option {unknown[0]!r}.'
                                  f'{closest_suggestion(unknown[0], accepted)} {accepts}') from None
        return args, kwargs
    bound.apply_defaults()
    for name, parameter in signature.parameters.items():
        if parameter.kind is parameter.VAR_KEYWORD:
            extra = bound.arguments[name]
            for key in extra.keys() & cls.options.keys():
                extra[key] = cls.options[key].check(cls.__name__, key, extra[key])
        elif name in cls.options:
            bound.arguments[name] = cls.options[name].check(cls.__name__, name, bound.arguments[name])
    return bound.args[1:], bound.kwargs


def checking_constructor(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap an encoding's ``__init__``: the outermost call checks the arguments against the declared
    options of the class being built, and marks the instance built when it returns (from then on
    declared options are checked when set, see :meth:`PositionEncoding.__setattr__`)."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self: PositionEncoding, *args: Any, **kwargs: Any) -> None:
        state = self.__dict__
        if state.get(CONSTRUCTING):
            init(self, *args, **kwargs)
            return
        args, kwargs = checked_arguments(type(self), signature, self, args, kwargs)
        state[CONSTRUCTING] = True
        try:
            init(self, *args, **kwargs)
        finally:
            del state[CONSTRUCTING]
        state[BUILT] = True

    __init__.checks_options = True
    return __init__
