"""Convert released checkpoints into vispe's module names.

    vispe convert petr official.pth vispe.pth [--config configs/petr/petr-r50_petr-lid_nuscenes.py]

``petr`` reads a PETR or 3DPPE checkpoint of the authors' mmdet3d plugins (megvii-research/PETR,
drilistbox/3DPPE) without running code from it (vispe's allow-list reader), maps every key it can onto
:class:`vispe.models.petr.PETRDetector` and lists the keys it cannot map (the FPN neck, DCN offsets). With
``--config`` the result is loaded into the model the config builds and every missing or mismatched key is named.
A checkpoint of another family (no head key, or under half of the tensors, maps) is refused and nothing is written.
The output is written atomically as ``{'state_dict': ..., 'meta': {'converted_from': ..., 'unmapped': [...]}}``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from vispe.checkpoint import read_state_dict
from vispe.engine.hooks import save_atomically
from vispe.models.petr.convert import CheckpointFamilyError, convert_petr_state_dict

CONVERTERS = {'petr': convert_petr_state_dict}


def check_against_config(config: str, state_dict: dict) -> list[str]:
    """Problems loading ``state_dict`` into the model of ``config`` (missing, unexpected, shape mismatch)."""
    from vispe.engine import load_config
    from vispe.registry import MODELS
    model = MODELS.build(load_config(config).model)
    expected = model.state_dict()
    problems = [f'missing in the converted file: {key}' for key in expected if key not in state_dict]
    problems += [f'not in the model: {key}' for key in state_dict if key not in expected]
    problems += [f'shape {tuple(value.shape)} != model {tuple(expected[key].shape)}: {key}'
                 for key, value in state_dict.items() if key in expected and value.shape != expected[key].shape]
    return problems


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe convert``."""
    parser = argparse.ArgumentParser(prog='vispe convert', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('kind', choices=sorted(CONVERTERS), help='which released family the checkpoint comes from')
    parser.add_argument('source', help='the released checkpoint (.pth)')
    parser.add_argument('output', help='where to write the vispe checkpoint')
    parser.add_argument('--config', help='a vispe config whose model must load the result (reports every mismatch)')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        conversion = CONVERTERS[args.kind](read_state_dict(args.source), args.source)
    except CheckpointFamilyError as error:
        print(f'{error} Nothing written.', file=sys.stderr)
        return 1
    print(f'{len(conversion.state_dict)} tensors converted from {args.source}')
    if conversion.derived:
        print(f'{len(conversion.derived)} buffers vispe derives from its config: {", ".join(conversion.derived)}')
    if any(key.startswith('backbone.') for key in conversion.state_dict):
        print('note: the released backbones are caffe-style ResNets (and DCN) or VoVNets; their weights load by name '
              'but compute differently in timm: fine-tune before evaluating')
    if conversion.unmapped:
        print(f'{len(conversion.unmapped)} keys have no vispe module and are left out:')
        for key in conversion.unmapped:
            print(f'  {key}')
    if args.config:
        problems = check_against_config(args.config, conversion.state_dict)
        for problem in problems:
            print(f'  {problem}')
        if problems:
            print(f'{len(problems)} mismatches against {args.config}; nothing written.', file=sys.stderr)
            return 1
    save_atomically(dict(state_dict=conversion.state_dict,
                         meta=dict(converted_from=str(args.source), kind=args.kind, unmapped=conversion.unmapped)),
                    Path(args.output))
    print(f'wrote {args.output}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
