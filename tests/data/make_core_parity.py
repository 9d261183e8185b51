"""Freeze the outputs of every 2D encoding before the attention-core redesign: writes ``core_parity_2d.pt``.

``core_parity_2d.pt`` was made by running this script at commit 015d029 (015d0294fcad7a9b10d79ccf320de15f702863a4,
"A corrupt COCO image names its id and the fix"), the last commit before the hooks, ``vispe/attention.py``,
``vispe/geometry/positions.py`` and DETR's decoder were redesigned. ``tests/test_core_parity.py`` rebuilds every
case with the recipe below through the current code and checks that the outputs have not changed.

What is frozen (all models in eval mode, float32, on the CPU):

* ``vit/<Encoding>/<example index>``: for every registered encoding class and every entry of its ``examples``
  class attribute, plus three stacks (``stack/...``) and one more config (``extra/...``), a 2-block timm
  ``vit_tiny_patch16_224`` (embed 192, 3 heads of 64, cls token) at 32 px with patch 8 (4×4 grid): logits on a
  (2, 3, 32, 32) batch, logits on a (2, 3, 48, 40) batch (6×5 grid, the extrapolation path) and
  ``forward_features`` on the 32 px batch.
* ``detr_encoder/<Encoding>/<example index>``: the same configs in a 2-layer :class:`DETREncoder` (d=32, 4 heads)
  built for a 4×4 grid, on (2, 32, 5, 6) features with a padded valid mask (image 0 whole, image 1 real in its
  top-left 4×3) and without a mask; the masked output is stored as its real cells and its padded cells
  separately. Encodings with an ``embed`` hook also in ``absolute_mode='input'`` (``detr_encoder_input/...``).
* ``detr/<Encoding>``: the whole :class:`DETR` (resnet18 to stride 8 with random weights, d=32, 2 encoder and
  2 decoder layers, 4 queries; decoder keys carry DETRSine whatever the encoder's encoding) in 'tensor' mode:
  logits and boxes of every decoder layer, with pixel masks and without. Its weights other than the backbone's
  are frozen too (``state``, ``state_layout``): the test loads them into the rebuilt model with
  ``load_state_dict(strict=True)`` before comparing, so a redesigned decoder is checked on the same weights.

Weights come from ``torch.manual_seed(0)`` before the model is built, then every parameter of the encoding
gets deterministic noise seeded by its name (:func:`perturb_encoding`), so that encodings whose tables start at
zero (iRPE's lookups, PEG's bias) are exercised. ``<case>/weights`` holds a fingerprint of the whole state dict
(of the backbone alone for a whole DETR; sum and sum of absolute values of each entry, names in
``<case>/weight_names``): when only that key fails, the redesign changed how models are initialised (the order in
which the seeded RNG is used, or the state-dict entries), not what they compute.
``<case>/config`` is the case's encoding config as JSON, from which the test rebuilds it.

Every case that builds and runs at 015d029 is frozen; those that do not are listed under ``meta/skipped``
(empty: every case ran at 015d029).

Rerun (it must be the committed code of 015d029, never a work tree with edits)::

    git -C /work/main worktree add /tmp/pre_redesign 015d029
    cd /tmp/pre_redesign && PYTHONPATH=/tmp/pre_redesign /work/main/.venv/bin/python \\
        /work/main/tests/data/make_core_parity.py --out /work/main/tests/data/core_parity_2d.pt
    git -C /work/main worktree remove /tmp/pre_redesign --force

The script refuses to run when ``vispe`` is not imported from a clean checkout of 015d029 (``--any-commit``
overrides this, e.g. to check that a rerun on 015d029 reproduces the file bit for bit).

The recipe (``build_*``, ``*_outputs``, inputs and seeds) is imported by the test: do not change it, or the
frozen file no longer matches what the test rebuilds.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import torch

FROZEN_COMMIT = '015d0294fcad7a9b10d79ccf320de15f702863a4'
DEFAULT_OUT = Path(__file__).resolve().parent / 'core_parity_2d.pt'

# Stacks composed from registered encodings, frozen beside the per-class examples.
STACKS = {
    'stack/LearnedAPE+iRPE': ['LearnedAPE', dict(type='iRPE', method='product', mode='contextual', on='qkv')],
    'stack/RoPEMixed+LearnedAPE': ['RoPEMixed', 'LearnedAPE'],
    'stack/SinCos2D+RoPEAxial+ALiBi2D': ['SinCos2D', dict(type='RoPEAxial'), dict(type='ALiBi2D')],
}
# Configs beyond the classes' examples: LookHere's third example ('zerotriangles' with fill_with='max') adds an
# all-zero bias (the 'zero' heads' largest penalty is 0), so the masked form of the same heads is added.
EXTRAS = {
    'extra/LookHere-zerotriangles-inf': dict(type='LookHere', directions='zerotriangles'),
}
# The whole-DETR cases: DETR's own default encoder (DETRSine), and a rotary encoder for contrast; the decoder's
# keys carry DETRSine in both.
DETR_ENCODINGS = {'detr/DETRSine': None, 'detr/RoPEAxial': dict(type='RoPEAxial')}

NOISE_STD = 0.2


# ----------------------------------------------------------------------------------------------------------
# The recipe (shared with tests/test_core_parity.py)
# ----------------------------------------------------------------------------------------------------------

def perturb_encoding(encoding: torch.nn.Module) -> None:
    """Add N(0, NOISE_STD²) noise to every parameter of the encoding, from a generator seeded by the parameter's
    name (so the noise does not depend on the order parameters are created or listed in)."""
    with torch.no_grad():
        for name, param in encoding.named_parameters():
            generator = torch.Generator().manual_seed(zlib.crc32(name.encode()))
            param.add_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * NOISE_STD)


def weight_fingerprint(model: torch.nn.Module, prefix: str = '') -> tuple[list[str], torch.Tensor]:
    """State-dict names (sorted) and a (len, 2) float64 tensor of each entry's sum and sum of absolute values, for
    the floating-point entries whose names start with ``prefix``."""
    state = {k: v for k, v in model.state_dict().items() if v.is_floating_point() and k.startswith(prefix)}
    names = sorted(state)
    values = torch.tensor([[state[n].double().sum().item(), state[n].double().abs().sum().item()] for n in names],
                          dtype=torch.float64)
    return names, values


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def build_vit(cfg: Any) -> torch.nn.Module:
    import vispe
    torch.manual_seed(0)
    model = vispe.create_vit('vit_tiny_patch16_224', encoding=cfg, num_classes=5, depth=2, img_size=32,
                             patch_size=8).eval()
    perturb_encoding(model.encoding)
    return model


def vit_outputs(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    images_32, images_48x40 = seeded(1, 2, 3, 32, 32), seeded(2, 2, 3, 48, 40)
    with torch.no_grad():
        return {'logits_32': model(images_32), 'logits_48x40': model(images_48x40),
                'features_32': model.forward_features(images_32)}


def build_detr_encoder(cfg: Any, absolute_mode: str = 'every_layer') -> torch.nn.Module:
    from vispe.models.detr import DETREncoder
    torch.manual_seed(0)
    encoder = DETREncoder(embed_dim=32, depth=2, num_heads=4, mlp_dim=64, dropout=0.0, encoding=cfg, grid_size=4,
                          stride=32, absolute_mode=absolute_mode).eval()
    perturb_encoding(encoder.encoding)
    return encoder


def detr_encoder_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Features (2, 32, 5, 6) and a valid mask: image 0 whole, image 1 real in its top-left 4×3 cells."""
    features = seeded(3, 2, 32, 5, 6)
    valid_mask = torch.zeros(2, 5, 6, dtype=torch.bool)
    valid_mask[0] = True
    valid_mask[1, :4, :3] = True
    return features, valid_mask


def detr_encoder_outputs(encoder: torch.nn.Module) -> dict[str, torch.Tensor]:
    features, valid_mask = detr_encoder_inputs()
    with torch.no_grad():
        masked = encoder(features, valid_mask)
        unmasked = encoder(features)
    real = valid_mask.flatten(1)
    return {'memory_masked_real': masked[real], 'memory_masked_pad': masked[~real], 'memory_unmasked': unmasked}


def build_detr(encoding: Any) -> torch.nn.Module:
    """The small offline DETR of tests/validation/test_model_inputs.py (random resnet18 to stride 8, d=32),
    with 2 encoder and 2 decoder layers."""
    from vispe.registry import MODELS
    encoder = dict(depth=2, num_heads=4, mlp_dim=64, dropout=0.0)
    if encoding is not None:
        encoder['encoding'] = encoding
    torch.manual_seed(0)
    model = MODELS.build(dict(
        type='DETR', backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-3), num_classes=3,
        num_queries=4, embed_dim=32, image_size=64, encoder=encoder,
        decoder=dict(depth=2, num_heads=4, mlp_dim=64, dropout=0.0))).eval()
    perturb_encoding(model.encoder.encoding)
    return model


def detr_outputs(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """'tensor' mode on (2, 3, 64, 64) images, with pixel masks (image 1 real in its top-left 48×40) and without."""
    images = seeded(4, 2, 3, 64, 64)
    masks = torch.zeros(2, 64, 64, dtype=torch.bool)
    masks[0] = True
    masks[1, :48, :40] = True
    images[1, :, 48:] = 0
    images[1, :, :, 40:] = 0
    with torch.no_grad():
        masked = model(images, masks, mode='tensor')
        unmasked = model(images, mode='tensor')
    return {'logits_masked': masked['logits'], 'boxes_masked': masked['boxes'],
            'logits_unmasked': unmasked['logits'], 'boxes_unmasked': unmasked['boxes']}


def transformer_state(model: torch.nn.Module) -> tuple[str, torch.Tensor]:
    """A DETR's state dict less its backbone, as a JSON layout ``[[name, shape], ...]`` (sorted by name) and one
    flat float32 tensor (~49k values)."""
    state = {name: value for name, value in model.state_dict().items() if not name.startswith('backbone.')}
    names = sorted(state)
    layout = json.dumps([[name, list(state[name].shape)] for name in names])
    return layout, torch.cat([state[name].detach().float().flatten() for name in names])


def load_transformer_state(model: torch.nn.Module, layout: str, flat: torch.Tensor) -> None:
    """Load a state frozen by :func:`transformer_state` (names as at 015d029) beside the model's own backbone,
    through ``load_state_dict(strict=True)``: a DETR checkpoint made at 015d029 must still load."""
    state = {name: value for name, value in model.state_dict().items() if name.startswith('backbone.')}
    offset = 0
    for name, shape in json.loads(layout):
        size = int(torch.Size(shape).numel())
        state[name] = flat[offset:offset + size].reshape(shape).clone()
        offset += size
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise AssertionError(f'The encoder/decoder/head weights of a DETR made at 015d029 no longer load with '
                             f'load_state_dict(strict=True) (renamed or reshaped entries need a load hook that '
                             f'converts the old names): {exc}') from exc


def build_model(kind: str, cfg: Any) -> torch.nn.Module:
    if kind == 'vit':
        return build_vit(cfg)
    if kind == 'detr_encoder':
        return build_detr_encoder(cfg)
    if kind == 'detr_encoder_input':
        return build_detr_encoder(cfg, absolute_mode='input')
    if kind == 'detr':
        return build_detr(cfg)
    raise ValueError(f'Unknown case kind {kind!r}.')


def case_outputs(kind: str, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {'vit': vit_outputs, 'detr_encoder': detr_encoder_outputs, 'detr_encoder_input': detr_encoder_outputs,
            'detr': detr_outputs}[kind](model)


def compute_case(case_id: str, cfg: Any, frozen_state: tuple[str, torch.Tensor] | None = None) -> dict[str, Any]:
    """Every frozen value of one case: its outputs, and the names and fingerprint of its seeded weights.

    A whole DETR also gives its non-backbone weights (``state_layout``, ``state``); with ``frozen_state`` (those of
    015d029) they are loaded after the fingerprint is taken and before the outputs are computed, so DETR's outputs
    are checked on the frozen weights even if the seeded initialisation of its transformer changed.
    """
    kind = case_id.split('/', 1)[0]
    model = build_model(kind, cfg)
    # a whole DETR's other weights are frozen in full (``state``); only its seeded backbone is fingerprinted
    names, fingerprint = weight_fingerprint(model, 'backbone.' if kind == 'detr' else '')
    values: dict[str, Any] = {'weights': fingerprint, 'weight_names': json.dumps(names)}
    if kind == 'detr':
        values['state_layout'], values['state'] = transformer_state(model)
        if frozen_state is not None:
            load_transformer_state(model, *frozen_state)
    return {**case_outputs(kind, model), **values}


def config_to_json(cfg: Any) -> str:
    return json.dumps(cfg)


def config_from_json(text: str) -> Any:
    """The config stored with a case (tuples come back as lists, which every encoding accepts)."""
    return json.loads(text)


# ----------------------------------------------------------------------------------------------------------
# Generation (run at 015d029 only)
# ----------------------------------------------------------------------------------------------------------

def registered_classes() -> list[tuple[str, type]]:
    """(name, class) of every registered encoding class (built-in and plugins), by name."""
    import vispe
    names = [info.name for info in vispe.list_encodings()]
    return [(name, vispe.registry.ENCODINGS.get(name)) for name in sorted(names)]


def registered_examples() -> list[tuple[str, int, dict[str, Any]]]:
    """(class name, example index, config) for every registered encoding class and every example it lists; a
    composite without examples is skipped."""
    found = []
    for name, cls in registered_classes():
        for index, options in enumerate(getattr(cls, 'examples', ()) or ()):
            found.append((name, index, dict(type=name, **options)))
    return found


def all_cases() -> tuple[list[tuple[str, Any]], list[str]]:
    """(case id, config) of every case to try, and the encoding classes left out (composites without examples)."""
    import vispe
    examples = registered_examples()
    left_out = sorted(name for name, cls in registered_classes() if not getattr(cls, 'examples', ()))
    configs = [(f'{name}/{index}', cfg) for name, index, cfg in examples]
    configs += [(f'{name}/0', cfg) for name, cfg in {**STACKS, **EXTRAS}.items()]
    cases = [(f'vit/{suffix}', cfg) for suffix, cfg in configs]
    cases += [(f'detr_encoder/{suffix}', cfg) for suffix, cfg in configs]
    embed_configs = [(suffix, cfg) for suffix, cfg in configs if 'embed' in vispe.build_encoding(
        cfg, embed_dim=32, num_heads=4, head_dim=8, depth=2, grid_size=(4, 4), patch_size=(32, 32),
        num_prefix_tokens=0).active_hooks]
    cases += [(f'detr_encoder_input/{suffix}', cfg) for suffix, cfg in embed_configs]
    cases += list(DETR_ENCODINGS.items())
    return cases, left_out


def check_checkout(any_commit: bool) -> str:
    """The commit vispe is imported from; refuses anything but a clean 015d029 unless ``any_commit``."""
    import vispe
    root = Path(vispe.__file__).resolve().parents[1]
    head = subprocess.run(['git', '-C', str(root), 'rev-parse', 'HEAD'], capture_output=True, text=True,
                          check=True).stdout.strip()
    dirty = subprocess.run(['git', '-C', str(root), 'status', '--porcelain', '--untracked-files=no'],
                           capture_output=True, text=True, check=True).stdout.strip()
    print(f'vispe imported from {vispe.__file__} (commit {head}{", with edits" if dirty else ""})')
    if not any_commit and (head != FROZEN_COMMIT or dirty):
        sys.exit(f'Refusing to freeze outputs: vispe must come from a clean checkout of {FROZEN_COMMIT}; got {head}'
                 f'{" with uncommitted edits" if dirty else ""}. See the module docstring, or pass --any-commit.')
    return head + ('+dirty' if dirty else '')


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', type=Path, default=DEFAULT_OUT)
    parser.add_argument('--any-commit', action='store_true', help='run on any checkout (not for the frozen file)')
    args = parser.parse_args(argv)
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    torch.set_num_threads(min(2, torch.get_num_threads()))
    commit = check_checkout(args.any_commit)

    import timm

    cases, left_out = all_cases()
    frozen: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for case_id, cfg in cases:
        cfg = config_from_json(config_to_json(cfg))  # exactly what the test will rebuild from
        try:
            values = compute_case(case_id, cfg)
        except Exception as exc:  # a case that does not run at this commit is recorded, not frozen
            skipped[case_id] = f'{type(exc).__name__}: {exc}'
            print(f'skip {case_id}: {skipped[case_id]}')
            continue
        frozen[f'{case_id}/config'] = config_to_json(cfg)
        for key, value in values.items():
            frozen[f'{case_id}/{key}'] = value.detach().clone().contiguous() if isinstance(value, torch.Tensor) \
                else value
        print(f'froze {case_id}: {sorted(values)}')
    frozen['meta/commit'] = commit
    frozen['meta/versions'] = json.dumps({'torch': torch.__version__, 'timm': timm.__version__,
                                          'python': sys.version.split()[0]})
    frozen['meta/skipped'] = json.dumps(skipped)
    frozen['meta/left_out_classes'] = json.dumps(left_out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(frozen, args.out)
    print(f'wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB, {len(frozen)} keys, '
          f'{len({k.rsplit("/", 1)[0] for k in frozen if not k.startswith("meta/")})} cases, {len(skipped)} skipped)')


if __name__ == '__main__':
    main()
