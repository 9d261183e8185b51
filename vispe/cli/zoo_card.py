"""Write model-zoo cards from what the tools produced: a trained work dir and an eval_resolution JSON.

    vispe zoo-card work_dirs/full/vit-t4_ape_fmnist-28 ... --eval results/zoo/extrapolation.json

For each work dir: ``models/<name>/`` gets the config, the weights-only checkpoint (if at most
``--max-mb`` MB) and a README card with the training command, the checkpoint's SHA-256 and the
extrapolation table of that model (from the JSON: command, sizes, test subset). Work dirs that the JSON groups
as seeds of one config (``eval_resolution.py --group-seeds`` on ``<name>_s0``, ``<name>_s1``, ...) make one card
``<name>`` with every seed's row, checkpoint and training command and the mean ± spread (max - min):

    vispe zoo-card work_dirs/zoo/vit-t4_ape_fmnist-28_s0 work_dirs/zoo/vit-t4_ape_fmnist-28_s1 \\
        --eval results/zoo/extrapolation.json

``models/README.md`` gets an index table of every card (mean ± spread for seed groups). Numbers are copied from
the tools' outputs, never typed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

import torch
from mmengine.config import Config

from vispe.engine.arguments import InvalidArgument, existing_file, existing_folder, non_negative_float, reported_by

INDEX_START, INDEX_END = '<!-- zoo:start -->', '<!-- zoo:end -->'


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe zoo-card``."""
    parser = argparse.ArgumentParser(prog='vispe zoo-card', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('work_dirs', nargs='+', type=Path)
    parser.add_argument('--eval', type=Path, required=True, help='JSON written by vispe eval-resolution')
    parser.add_argument('--zoo', type=Path, default=Path('models'))
    parser.add_argument('--max-mb', type=non_negative_float, default=2.0)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless every work dir holds one
    config and best.pth and was evaluated in the JSON (every seed of a seed group given), the zoo has its index
    README.md and --max-mb is not negative."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        for work_dir in args.work_dirs:
            existing_folder(work_dir, 'work dir')
            configs = sorted(work_dir.glob('*.py'))
            if len(configs) != 1:
                raise InvalidArgument('work dir', work_dir, f'holds {len(configs)} configs (.py), not the one '
                                      'training dumps', 'give a work dir written by vispe train')
            if not (work_dir / 'best.pth').is_file():
                raise InvalidArgument('work dir', work_dir, 'has no best.pth',
                                      'give a work dir whose training finished (vispe train writes best.pth)')
        existing_file(args.eval, '--eval')
        if not (args.zoo / 'README.md').is_file():
            raise InvalidArgument('--zoo', args.zoo, 'has no README.md (the index of the cards)',
                                  'give the model-zoo folder, or create README.md in it')
        args.report = json.loads(args.eval.read_text())
        args.cards = card_members(args.work_dirs, args.report)
    return args


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def validation_line(meta: dict) -> str:
    top1 = meta.get('metrics', {}).get('accuracy/top1')
    if top1 is None:
        return 'The checkpoint records no validation metric.'
    return (f'Best validation top-1 during training: {top1:.2f} (epoch {meta.get("epoch")}, on the config\'s '
            f'validation subset).')


def training_command(work_dir: Path) -> str:
    """The command that trains this work dir: its config, work dir and seed (read from the dumped config)."""
    config = next(work_dir.glob('*.py'))
    seed = Config.fromfile(str(config)).get('randomness', {}).get('seed')
    return (f'python tools/train.py configs/vit/{config.name} --work-dir {work_dir.as_posix()}'
            + (f' --cfg-options randomness.seed={seed}' if seed is not None else ''))


def card(name: str, members: list[tuple[Path, dict]], group: dict | None, report: dict, kept: bool) -> str:
    """The card of one model: one run, or a seed group (each seed's row and the mean ± spread)."""
    sizes = report['sizes']
    first_dir, first = members[0]
    config_name = next(first_dir.glob('*.py')).name
    commands = [training_command(work_dir) for work_dir, _ in members]
    lines = [f'# {name}', '',
             f'Config: [`{config_name}`]({config_name}) (dumped by training; the source is '
             f'`configs/vit/{config_name}`).',
             '', 'Trained with:', '', '```bash', *commands, '```', '']
    for work_dir, run in members:
        meta = torch.load(work_dir / 'best.pth', weights_only=True)['meta']
        checkpoint = f'{work_dir.name}.pth'
        lines += [f'`{work_dir.name}`: {validation_line(meta)} Checkpoint `best.pth`, SHA-256 '
                  f'`{run["checkpoint_sha256"]}`' + (f' — [{checkpoint}]({checkpoint}) in this folder.' if kept else
                                                     ' (too large to keep in the repository).'), '']
    lines += [f'Top-1 (%) by test size, {report["eval_mode"]}, test subset {first["dataset"].get("subset")} '
              f'(seed {first["dataset"].get("subset_seed")}), trained at {first["train_size"]} px:', '',
              '| model | ' + ' | '.join(str(s) for s in sizes) + ' |', '|---|' + '---|' * len(sizes)]
    lines += [f'| {work_dir.name} | ' + ' | '.join(f'{run["results"][str(s)]["top1"]:.2f}' for s in sizes) + ' |'
              for work_dir, run in members]
    if group is not None:
        lines.append(f'| mean ± spread ({group["spread"]}) | ' + ' | '.join(
            f'{group["results"][str(s)]["mean"]["top1"]:.2f} ± {group["results"][str(s)]["spread"]["top1"]:.2f}'
            for s in sizes) + ' |')
    tuned = tuned_runs(members, report)
    if tuned:
        lines += [f'| {run["label"]} | ' + ' | '.join(f'{run["results"][str(s)]["top1"]:.2f}' for s in sizes) + ' |'
                  for run in tuned]
        tuned_group = tuned_seed_group(group, report)
        if tuned_group is not None:
            lines.append('| tuned: mean ± spread | ' + ' | '.join(
                f'{tuned_group["results"][str(s)]["mean"]["top1"]:.2f} ± '
                f'{tuned_group["results"][str(s)]["spread"]["top1"]:.2f}' for s in sizes) + ' |')
        lines += ['', '`+tuned` rows: the test-time options that `--tune` chose per size on held-out validation '
                  'images (never the test set), then measured on the test subset:', '',
                  '| model | ' + ' | '.join(str(s) for s in sizes) + ' |', '|---|' + '---|' * len(sizes)]
        lines += [f'| {run["tuned_from"]} | ' + ' | '.join(
            chosen_options(report['tuning'][run['tuned_from']][str(s)]['options']) for s in sizes) + ' |'
            for run in tuned]
    lines += ['', 'Measured with:', '', '```bash', report['command'], '```', '']
    return '\n'.join(lines)


def tuned_runs(members: list[tuple[Path, dict]], report: dict) -> list[dict]:
    """The ``+tuned`` rows that ``eval_resolution.py --tune`` wrote for these runs, in the members' order."""
    tuned = {run['tuned_from']: run for run in report['runs'] if 'tuned_from' in run}
    return [tuned[run['label']] for _, run in members if run['label'] in tuned]


def tuned_seed_group(group: dict | None, report: dict) -> dict | None:
    """The seed group of the ``+tuned`` rows of a seed group (``<name>+tuned_s<seed>``), if evaluated."""
    if group is None:
        return None
    return next((g for g in report.get('seed_groups', []) if g['label'] == f'{group["label"]}+tuned'), None)


def chosen_options(options: dict[str, Any]) -> str:
    """``theta=50, position_scale=0.667`` from ``{'backbone.encoding.theta': 50.0, ...}``."""
    def value(v: Any) -> str:
        return f'{v:.3g}' if isinstance(v, float) else str(v)
    return ', '.join(f'{name.rsplit(".", 1)[-1]}={value(v)}' for name, v in options.items()) or '—'


def index_cell(results: dict, size: int) -> str:
    top1 = f'{results["top1"][str(size)]:.2f}'
    spread = results.get('top1_spread')
    return f'{top1} ± {spread[str(size)]:.2f}' if spread else top1


def card_results(members: list[tuple[Path, dict]], group: dict | None, report: dict) -> dict:
    """``results.json`` of a card: top-1 (mean and spread for a seed group) per size, and the same for its
    ``+tuned`` rows when the report has them, stamped with the evaluation's date and commit (the run that measured
    them)."""
    def summary(group: dict | None, runs: list[dict]) -> dict:
        if group is not None:
            return dict(top1={k: v['mean']['top1'] for k, v in group['results'].items()},
                        top1_spread={k: v['spread']['top1'] for k, v in group['results'].items()},
                        top5={k: v['mean']['top5'] for k, v in group['results'].items()})
        return dict(top1={k: v['top1'] for k, v in runs[0]['results'].items()},
                    top5={k: v['top5'] for k, v in runs[0]['results'].items()})
    results = dict(sizes=report['sizes'], **summary(group, [run for _, run in members]))
    tuned = tuned_runs(members, report)
    if tuned:
        results['tuned'] = summary(tuned_seed_group(group, report), tuned)
        results['tuned']['options'] = {run['tuned_from']: {size: choice['options'] for size, choice in
                                                           report['tuning'][run['tuned_from']].items()}
                                       for run in tuned}
    results.update(date=report.get('date'), commit=report.get('commit'), command=report['command'],
                   dataset=members[0][1]['dataset'],
                   seeds={work_dir.name: dict(top1={k: v['top1'] for k, v in run['results'].items()},
                                              checkpoint_sha256=run['checkpoint_sha256'])
                          for work_dir, run in members})
    return results


def update_index(zoo: Path) -> None:
    """One table per set of test sizes in ``<zoo>/README.md``: cards with seeds (mean ± spread) first."""
    rows = []
    for card_path in sorted(zoo.glob('*/README.md')):
        results = json.loads((card_path.parent / 'results.json').read_text())
        sizes = results['sizes']
        name = card_path.parent.name
        rows.append((f'[{name}]({name}/README.md)', tuple(sizes), 'top1_spread' in results,
                     [index_cell(results, s) for s in sizes]))
        if 'tuned' in results:
            rows.append((f'[{name}]({name}/README.md) +tuned', tuple(sizes), 'top1_spread' in results,
                         [index_cell(results['tuned'], s) for s in sizes]))
    index = zoo / 'README.md'
    text = index.read_text()
    if INDEX_START not in text:
        text += f'\n{INDEX_START}\n{INDEX_END}\n'
    head, rest = text.split(INDEX_START, 1)
    _, tail = rest.split(INDEX_END, 1)
    lines = []
    for sizes, seeded in sorted({(r[1], r[2]) for r in rows}, key=lambda key: (not key[1], key[0])):
        if lines:
            lines.append('')
        lines.append('Mean ± spread (max − min) over the seeds of each card:' if seeded else 'One run per card:')
        lines += ['', '| model | ' + ' | '.join(f'{s} px' for s in sizes) + ' |', '|---|' + '---|' * len(sizes)]
        lines += [f'| {name} | ' + ' | '.join(values) + ' |'
                  for name, row_sizes, row_seeded, values in rows if (row_sizes, row_seeded) == (sizes, seeded)]
    index.write_text(f'{head}{INDEX_START}\n' + '\n'.join(lines) + f'\n{INDEX_END}{tail}')


def card_members(work_dirs: list[Path], report: dict) -> dict[str, tuple[list[tuple[Path, dict]], dict | None]]:
    """Card name -> ([(work dir, its run in the report)], its seed group or None); a work dir in a seed group of the
    report joins the group's card.

    Raises:
        InvalidArgument: a work dir was not evaluated, changed since, or a seed group is given in part.
    """
    runs = {Path(run['checkpoint']).parent.resolve(): run for run in report['runs'] if 'tuned_from' not in run}
    groups = {member: group for group in report.get('seed_groups', []) for member in group['members']}
    cards: dict[str, tuple[list[tuple[Path, dict]], dict | None]] = {}
    for work_dir in work_dirs:
        run = runs.get(work_dir.resolve())
        if run is None:
            raise InvalidArgument('work dir', work_dir, 'has no results in the --eval JSON',
                                  'run vispe eval-resolution on it first')
        if sha256(work_dir / 'best.pth') != run['checkpoint_sha256']:
            raise InvalidArgument('work dir', work_dir, 'best.pth changed since it was evaluated', 'evaluate it again')
        group = groups.get(run['label'])
        cards.setdefault(group['label'] if group else work_dir.name, ([], group))[0].append((work_dir, run))
    for name, (members, group) in cards.items():
        if group is not None and len(members) != len(group['members']):
            raise InvalidArgument('work dir', [str(w) for w, _ in members], f'the seed group {name!r} has '
                                  f'{len(group["members"])} runs: {", ".join(group["members"])}',
                                  'give the work dirs of all its seeds')
    return cards


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = args.report
    for name, (members, group) in args.cards.items():
        folder = args.zoo / name
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob('*.pth'):
            stale.unlink()
        shutil.copy(next(members[0][0].glob('*.py')), folder)
        kept = all((work_dir / 'best.pth').stat().st_size <= args.max_mb * 2 ** 20 for work_dir, _ in members)
        if kept:
            for work_dir, _ in members:
                shutil.copy(work_dir / 'best.pth', folder / f'{work_dir.name}.pth')
        (folder / 'README.md').write_text(card(name, members, group, report, kept))
        (folder / 'results.json').write_text(json.dumps(card_results(members, group, report), indent=1))
        print(f'wrote {folder}')
    update_index(args.zoo)
    return 0


if __name__ == '__main__':
    sys.exit(main())
