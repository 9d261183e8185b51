"""Write model-zoo cards from what the tools produced: a trained work dir and an eval_resolution JSON.

    python tools/zoo_card.py work_dirs/full/vit-t2_ape_fmnist-28 ... --eval results/zoo/extrapolation.json

For each work dir: ``models/<name>/`` gets the config, the weights-only checkpoint (if at most
``--max-mb`` MB) and a README card with the training command, the checkpoint's SHA-256 and the
extrapolation table of that model (from the JSON: command, sizes, test subset). ``models/README.md``
gets an index table of every card. Numbers are copied from the tools' outputs, never typed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

import torch

from vispe.engine.arguments import InvalidArgument, existing_file, existing_folder, non_negative_float, reported_by

REPO_ROOT = Path(__file__).resolve().parents[1]
INDEX_START, INDEX_END = '<!-- zoo:start -->', '<!-- zoo:end -->'


def parse_args() -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless every work dir holds one
    config and best.pth, the JSON exists, the zoo has its index README.md and --max-mb is not negative."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('work_dirs', nargs='+', type=Path)
    parser.add_argument('--eval', type=Path, required=True, help='JSON written by tools/eval_resolution.py')
    parser.add_argument('--zoo', type=Path, default=REPO_ROOT / 'models')
    parser.add_argument('--max-mb', type=non_negative_float, default=2.0)
    args = parser.parse_args()
    with reported_by(parser):
        for work_dir in args.work_dirs:
            existing_folder(work_dir, 'work dir')
            configs = sorted(work_dir.glob('*.py'))
            if len(configs) != 1:
                raise InvalidArgument('work dir', work_dir, f'holds {len(configs)} configs (.py), not the one '
                                      'training dumps', 'give a work dir written by tools/train.py')
            if not (work_dir / 'best.pth').is_file():
                raise InvalidArgument('work dir', work_dir, 'has no best.pth',
                                      'give a work dir whose training finished (tools/train.py writes best.pth)')
        existing_file(args.eval, '--eval')
        if not (args.zoo / 'README.md').is_file():
            raise InvalidArgument('--zoo', args.zoo, 'has no README.md (the index of the cards)',
                                  'give the model-zoo folder, or create README.md in it')
    return args


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def validation_line(meta: dict) -> str:
    top1 = meta.get('metrics', {}).get('accuracy/top1')
    if top1 is None:
        return 'The checkpoint records no validation metric.'
    return (f'Best validation top-1 during training: {top1:.2f} (epoch {meta.get("epoch")}, on the config\'s '
            f'validation subset).')


def card(name: str, work_dir: Path, run: dict, report: dict, kept: bool) -> str:
    meta = torch.load(work_dir / 'best.pth', weights_only=True)['meta']
    sizes = report['sizes']
    config_name = next(work_dir.glob('*.py')).name
    lines = [
        f'# {name}', '',
        f'Config: [`{config_name}`]({config_name}) (dumped by training; the source is `configs/vit/{config_name}`).', '',
        'Trained with:', '', '```bash', f'python tools/train.py configs/vit/{config_name}', '```', '',
        validation_line(meta), '',
        f'Checkpoint: `best.pth`, SHA-256 `{run["checkpoint_sha256"]}`'
        + (f' — [{name}.pth]({name}.pth) in this folder.' if kept else ' (too large to keep in the repository).'), '',
        f'Top-1 (%) by test size, {report["eval_mode"]}, test subset {run["dataset"].get("subset")} '
        f'(seed {run["dataset"].get("subset_seed")}), trained at {run["train_size"]} px:', '',
        '| ' + ' | '.join(str(s) for s in sizes) + ' |', '|' + '---|' * len(sizes),
        '| ' + ' | '.join(f'{run["results"][str(s)]["top1"]:.2f}' for s in sizes) + ' |', '',
        'Measured with:', '', '```bash', report['command'], '```', '',
    ]
    return '\n'.join(lines)


def update_index(zoo: Path) -> None:
    rows = []
    for card_path in sorted(zoo.glob('*/README.md')):
        results = json.loads((card_path.parent / 'results.json').read_text())
        sizes = results['sizes']
        rows.append((card_path.parent.name, sizes, [results['top1'][str(s)] for s in sizes]))
    index = zoo / 'README.md'
    text = index.read_text()
    if INDEX_START not in text:
        text += f'\n{INDEX_START}\n{INDEX_END}\n'
    head, rest = text.split(INDEX_START, 1)
    _, tail = rest.split(INDEX_END, 1)
    lines = []
    for sizes in sorted({tuple(r[1]) for r in rows}):
        lines += ['| model | ' + ' | '.join(f'{s} px' for s in sizes) + ' |', '|---|' + '---|' * len(sizes)]
        lines += [f'| [{name}]({name}/README.md) | ' + ' | '.join(f'{v:.2f}' for v in values) + ' |'
                  for name, row_sizes, values in rows if tuple(row_sizes) == sizes]
    index.write_text(f'{head}{INDEX_START}\n' + '\n'.join(lines) + f'\n{INDEX_END}{tail}')


def main() -> int:
    args = parse_args()
    report = json.loads(args.eval.read_text())
    runs = {Path(run['checkpoint']).parent.resolve(): run for run in report['runs']}
    for work_dir in args.work_dirs:
        run = runs.get(work_dir.resolve())
        if run is None:
            print(f'{args.eval} has no results for {work_dir}; run tools/eval_resolution.py on it first.',
                  file=sys.stderr)
            return 2
        if sha256(work_dir / 'best.pth') != run['checkpoint_sha256']:
            print(f'{work_dir / "best.pth"} changed since it was evaluated; evaluate it again.', file=sys.stderr)
            return 2
    for work_dir in args.work_dirs:
        run = runs[work_dir.resolve()]
        name = work_dir.name
        folder = args.zoo / name
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(next(work_dir.glob('*.py')), folder)
        checkpoint = work_dir / 'best.pth'
        kept = checkpoint.stat().st_size <= args.max_mb * 2 ** 20
        if kept:
            shutil.copy(checkpoint, folder / f'{name}.pth')
        (folder / 'README.md').write_text(card(name, work_dir, run, report, kept))
        (folder / 'results.json').write_text(json.dumps(dict(
            sizes=report['sizes'], top1={k: v['top1'] for k, v in run['results'].items()},
            top5={k: v['top5'] for k, v in run['results'].items()}, command=report['command'],
            dataset=run['dataset'], checkpoint_sha256=run['checkpoint_sha256']), indent=1))
        print(f'wrote {folder}')
    update_index(args.zoo)
    return 0


if __name__ == '__main__':
    sys.exit(main())
