"""Convert the papers' released checkpoints into vispe checkpoints.

    vispe convert FAMILY released.pth vispe.pth [--config CONFIG] [--option NAME=VALUE ...]

The file is read without running code from it (vispe's allow-list reader), every key the family's converter can map
is renamed onto the vispe model that computes the same outputs, and the keys with no vispe module are listed. The
result is loaded with strict=True into that model (the one the converter infers from the tensors' shapes, or
--config's) before anything is written; a file of another family is refused, naming the families its keys resemble.
The output is written atomically as {'state_dict': ..., 'meta': {'converted_from', 'kind', 'converter_version',
'unmapped', 'model', 'encodings'}}; load it with vispe.load_checkpoint or create_vit(..., pretrained=PATH).
"""
from __future__ import annotations

import argparse
import ast
import sys
from typing import Any, Sequence

from vispe.converters import CheckpointFamilyError, UnsupportedCheckpointError, list_converters
from vispe.converters.registry import ConverterOptionError, converter_options
from vispe.converters.files import ConversionMismatchError, convert_checkpoint
from vispe.checkpoint import CheckpointMismatchError
from vispe.serialization import CorruptCheckpointError, UnsafeCheckpointError


def families_help() -> str:
    """One paragraph per registered family: what it converts, where its weights are, their license."""
    lines = ['families:']
    for name, converter in list_converters().items():
        options = ', '.join(f'{option}={default!r}' for option, default in converter_options(converter).items())
        lines += [f'  {name}: {converter.summary}', f'      weights: {converter.released}',
                  f'      license: {converter.license}'] + ([f'      options: {options}'] if options else [])
    return '\n'.join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe convert``."""
    parser = argparse.ArgumentParser(prog='vispe convert', description=__doc__, epilog=families_help(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('kind', choices=list(list_converters()), metavar='FAMILY',
                        help=f'which released family the checkpoint comes from: {", ".join(list_converters())}')
    parser.add_argument('source', help='the released checkpoint (.pth, .pt, .bin or .safetensors)')
    parser.add_argument('output', help='where to write the vispe checkpoint')
    parser.add_argument('--config', help='a vispe config whose model must load the result (reports every mismatch)')
    parser.add_argument('--option', nargs='+', default=[], metavar='NAME=VALUE', type=converter_option,
                        help="the family converter's options, for what the tensors cannot say (e.g. detr's "
                             "num_heads=8); `vispe convert FAMILY --help` lists them under families")
    return parser


def converter_option(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with a Python literal value (``num_heads=12``)."""
    name, separator, value = text.partition('=')
    if not separator or not name.isidentifier():
        raise argparse.ArgumentTypeError(f'{text!r}: write a converter option as NAME=VALUE, e.g. num_heads=12.')
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        conversion = convert_checkpoint(args.kind, args.source, args.output, config=args.config, **dict(args.option))
    except (ConverterOptionError, CheckpointFamilyError, UnsupportedCheckpointError, ConversionMismatchError,
            CheckpointMismatchError, CorruptCheckpointError, UnsafeCheckpointError, FileNotFoundError) as error:
        message = str(error).strip("'")
        print(message if message.endswith('Nothing written.') else f'{message.rstrip(".")}. Nothing written.',
              file=sys.stderr)
        return 1
    print(f'{len(conversion.state_dict)} tensors converted from {args.source}')
    if conversion.derived:
        print(f'{len(conversion.derived)} buffers vispe derives from its config: {", ".join(conversion.derived)}')
    for note in conversion.notes:
        print(f'note: {note}')
    if conversion.unmapped:
        print(f'{len(conversion.unmapped)} keys have no vispe module and are left out:')
        for key in conversion.unmapped:
            print(f'  {key}')
    print(f'wrote {args.output}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
