"""Test-time options chosen per test size on held-out data (``tools/eval_resolution.py --tune``).

An encoding declares which of its test-time options may be tuned and the candidates to try
(:class:`vispe.encodings.options.Search`: LookHere's and ALiBi's slopes, RoPE's theta and position scale,
RPE-2D's evaluation positions, the resampling of LearnedAPE and SinCos2D). :func:`tunable_knobs` finds them in a
model, :func:`coordinate_search` picks a value for each by coordinate ascent on a score computed on held-out data
(never the test set): each knob in turn tries its candidates with the others fixed, rounds repeat until a round
changes nothing. The values as built are tried first and kept on ties, so a search at the training size that
finds nothing better returns the trained values.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch
from mmengine.config import Config

from vispe.encodings.base import PositionEncoding
from vispe.engine.arguments import InvalidArgument

__all__ = ['Knob', 'applied', 'check_held_out', 'coordinate_search', 'tunable_knobs']


@dataclass(frozen=True)
class Knob:
    """One tunable test-time option of one encoding module of a model."""

    path: str  # 'backbone.encoding.theta': the module path and the option name
    owner: PositionEncoding
    name: str
    candidates: tuple[Any, ...]  # the value as built first


def tunable_knobs(model: torch.nn.Module) -> list[Knob]:
    """Every test-time option with a declared search, in every encoding module of ``model`` (nested ones too)."""
    knobs = []
    for path, module in model.named_modules():
        if not isinstance(module, PositionEncoding):
            continue
        for name, option in type(module).options.items():
            if option.test_time and option.search is not None:
                knobs.append(Knob(f'{path}.{name}' if path else name, module, name,
                                  option.search.candidates(getattr(module, name))))
    return knobs


@contextlib.contextmanager
def applied(knobs: Sequence[Knob], values: Sequence[Any]) -> Iterator[None]:
    """Set each knob to its value for the block; the previous values come back after it."""
    previous = [getattr(knob.owner, knob.name) for knob in knobs]
    try:
        for knob, value in zip(knobs, values):
            setattr(knob.owner, knob.name, value)
        yield
    finally:
        for knob, value in zip(knobs, previous):
            setattr(knob.owner, knob.name, value)


def coordinate_search(knobs: Sequence[Knob], score: Callable[[], float],
                      max_rounds: int = 3) -> tuple[tuple[Any, ...], float, float, int]:
    """Coordinate ascent of ``score()`` (higher is better, computed with the knobs applied) over the candidates.

    Returns:
        (chosen values, their score, the score of the values as built, number of settings scored).
    """
    chosen = [knob.candidates[0] for knob in knobs]
    scores: dict[tuple[Any, ...], float] = {}

    def scored(values: tuple[Any, ...]) -> float:
        if values not in scores:
            with applied(knobs, values):
                scores[values] = float(score())
        return scores[values]

    built = scored(tuple(chosen))
    best = built
    for _ in range(max_rounds):
        changed = False
        for index, knob in enumerate(knobs):
            for candidate in knob.candidates:
                trial = tuple(chosen[:index] + [candidate] + chosen[index + 1:])
                value = scored(trial)
                if value > best:
                    best, chosen, changed = value, list(trial), True
        if not changed:
            break
    return tuple(chosen), best, built, len(scores)


def check_held_out(cfg: Config, label: str) -> None:
    """``--tune`` searches on the config's validation set: refuse a config whose validation set is its test set."""
    val, test = dict(cfg.val_dataloader.dataset), dict(cfg.test_dataloader.dataset)
    same = [key for key in ('split', 'ann_file') if key in val and val.get(key) == test.get(key)]
    if same:
        raise InvalidArgument('--tune', label, f'its config validates on its test set ({same[0]} '
                              f'{val[same[0]]!r} in both val_dataloader and test_dataloader), and --tune never '
                              'chooses options on test data', 'give the run a config whose val_dataloader holds out '
                              "part of the training data (FashionMNIST split='minival'), or leave out --tune")
