"""Tables of measured results from the JSON in models/ (``tools/eval_resolution.py``, ``tools/zoo_card.py``,
``tools/gaussians/report.py`` and the novel-view summary): mean ± spread (max − min) over seeds where the JSON
groups seeds."""
from __future__ import annotations

import math
import re
from pathlib import PurePosixPath

from vispe.reporting.markdown import mean_spread, table

DEVKIT = ('mAP', 'NDS', 'NDS_official')


def zoo_table(cards: dict[str, dict]) -> str:
    """The model zoo: top-1 % per test size of each card (``models/<card>/results.json``), and its ``+tuned`` row."""
    sizes = next(iter(cards.values()))['sizes']
    rows = []
    for path, card in sorted(cards.items()):
        name = PurePosixPath(path).parent.name
        for label, results in [(name, card), (f'{name} +tuned', card.get('tuned'))]:
            if results is None:
                continue
            spread = results.get('top1_spread')
            rows.append([f'`{label}`', *[mean_spread(results['top1'][str(s)], spread and spread[str(s)], 2)
                                         for s in sizes]])
    return table(['model', *[f'{s} px' for s in sizes]], rows)


def seed_group_table(document: dict, metric: str, digits: int = 3) -> str:
    """``eval_resolution.py --group-seeds`` over sizes (detection, classification): one row per seed group, one
    column per size."""
    sizes = document['sizes']
    rows = [[f'`{group["label"]}`', *[mean_spread(group['results'][str(s)]['mean'][metric],
                                                  group['results'][str(s)]['spread'][metric], digits) for s in sizes]]
            for group in document['seed_groups']]
    return table(['seed group', *[f'{s} px' for s in sizes]], rows)


def camera_condition(result: dict) -> str:
    """``90×160``, ``zoom 0.8, 90×160`` or ``rig other, 90×160`` of one multi-view evaluation."""
    size = f'{result["height"]}×{result["width"]}'
    if result['rig'] != 'config':
        return f'rig {result["rig"]}, {size}'
    return size if result['intrinsics_scale'] == 1.0 else f'zoom {result["intrinsics_scale"]:g}, {size}'


def latest_groups(documents: list[dict]) -> list[tuple[dict, dict]]:
    """(document, seed group) pairs of multi-view evaluations, oldest first, each seed group taken only from the
    evaluation that measured it last: the newest document holding it (by ``date``, then by place in the list) and the
    other documents of the same commit (one evaluation batch: its sizes, zooms and rigs), never a document without a
    commit besides the newest itself. A configuration trained and evaluated again replaces its older rows whole,
    never column by column; within the batch a later document wins a repeated condition."""
    order = sorted(range(len(documents)), key=lambda index: (documents[index]['date'], index))
    newest: dict[str, int] = {}
    for index in order:
        for group in documents[index]['seed_groups']:
            newest[group['label']] = index
    kept = []
    for index in order:
        for group in documents[index]['seed_groups']:
            chosen = documents[newest[group['label']]]
            if index == newest[group['label']] or (chosen['commit'] is not None
                                                     and documents[index]['commit'] == chosen['commit']):
                kept.append((documents[index], group))
    return kept


def multiview_table(documents: list[dict], metric: str = 'nusc/mAP') -> str:
    """``eval_resolution.py`` of multi-view detectors (sizes, zoom, rigs) merged: one row per seed group (its latest
    evaluation, :func:`latest_groups`), one column per condition."""
    columns: list[str] = []
    cells: dict[str, dict[str, str]] = {}
    for _, group in latest_groups(documents):
        for result in group['results']:
            condition = camera_condition(result)
            if condition not in columns:
                columns.append(condition)
            cells.setdefault(group['label'], {})[condition] = mean_spread(result['mean'][metric],
                                                                          result['spread'][metric], 3)
    rows = [[f'`{label}`', *[by.get(column, '–') for column in columns]] for label, by in cells.items()]
    return table(['seed group', *columns], rows)


def nuscenes_table(documents: list[dict], height: int) -> str:
    """vispe's nuScenes metric beside the devkit's at one image height, every rig: mAP, NDS (mean ± spread), mean
    errors, and the devkit's mAP / NDS / official NDS (each seed group's latest evaluation)."""
    rows: dict[tuple[str, str], list[str]] = {}
    for _, group in latest_groups(documents):
        for result in group['results']:
            if result['height'] != height or result['intrinsics_scale'] != 1.0:
                continue
            mean, spread = result['mean'], result['spread']
            rows[group['label'], result['rig']] = [
                f'`{group["label"]}`', result['rig'], mean_spread(mean['nusc/mAP'], spread['nusc/mAP'], 3),
                mean_spread(mean['nusc/NDS'], spread['nusc/NDS'], 3),
                *[f'{mean[f"nusc/{name}"]:.2f}' for name in ('mATE', 'mASE')],
                mean_spread(mean['nusc/mAOE'], spread['nusc/mAOE'], 2),
                ' / '.join(f'{mean[f"nusc/devkit/{name}"]:.3f}' for name in DEVKIT)]
    return table(['seed group', 'rig', 'mAP', 'NDS', 'mATE (m)', 'mASE', 'mAOE (rad)',
                  'devkit mAP / NDS / official NDS'], list(rows.values()))


def orientation_table(documents: list[dict], height: int) -> str:
    """Per-class orientation error (rad, mean ± spread over seeds) at one image height, every rig, of the seed
    groups whose latest evaluation records it (``nusc/<class>_AOE``)."""
    rows: dict[tuple[str, str], tuple[str, str, dict[str, str], str]] = {}
    classes: list[str] = []
    for _, group in latest_groups(documents):
        for result in group['results']:
            names = [key[len('nusc/'):-len('_AOE')] for key in result['mean']
                     if key.startswith('nusc/') and key.endswith('_AOE') and '/devkit/' not in key]
            if result['height'] != height or result['intrinsics_scale'] != 1.0 or not names:
                continue
            classes += [name for name in names if name not in classes]
            mean, spread = result['mean'], result['spread']
            rows[group['label'], result['rig']] = (f'`{group["label"]}`', result['rig'], {
                name: mean_spread(mean[f'nusc/{name}_AOE'], spread[f'nusc/{name}_AOE'], 2) for name in names},
                mean_spread(mean['nusc/mAOE'], spread['nusc/mAOE'], 2))
    return table(['seed group', 'rig', *classes, 'mAOE'],
                 [[label, rig, *[by.get(name, '–') for name in classes], mean]
                  for label, rig, by, mean in rows.values()])


def point_sweep_table(document: dict) -> str:
    """``eval_resolution.py --point-density --scene-scale`` of point detectors: one row per seed group and scene
    scale, one column per density and metric ('–' where a group has no value, e.g. no heading error without true
    positives)."""
    metrics = document['metrics']
    densities = sorted({result['point_density'] for group in document['seed_groups'] for result in group['results']})
    header = ['seed group', 'scene scale', *[f'{metric.split("/")[-1]} @ {d:g}×' for d in densities
                                             for metric in metrics]]
    rows = []
    for group in document['seed_groups']:
        by_scale: dict[float, dict[float, dict]] = {}
        for result in group['results']:
            by_scale.setdefault(result['scene_scale'], {})[result['point_density']] = result
        for scale, by_density in sorted(by_scale.items()):
            rows.append([f'`{group["label"]}`', f'{scale:g}',
                         *[mean_spread(by_density[d]['mean'][m], by_density[d]['spread'][m], 3)
                           if d in by_density and m in by_density[d]['mean'] else '–'
                           for d in densities for m in metrics]])
    return table(header, rows)


def crop_depth_table(document: dict) -> str:
    """``eval_resolution.py --crop-offsets --focal-splits``: AbsRel of all crops and of the corner crops per split."""
    splits = [result['split'] for result in document['seed_groups'][0]['results']]
    header = ['seed group', *[f'{split}{suffix}' for split in splits for suffix in ('', ': corner crops')]]
    rows = []
    for group in document['seed_groups']:
        by_split = {result['split']: result for result in group['results']}
        rows.append([f'`{group["label"]}`', *[mean_spread(by_split[split]['mean'][metric],
                                                          by_split[split]['spread'][metric], 3)
                                              for split in splits
                                              for metric in ('depth/absrel', 'depth/absrel_corner')]])
    return table(header, rows)


def novel_view_table(document: dict) -> str:
    """Novel-view synthesis: PSNR / SSIM over all and object pixels per encoding (mean ± spread), and the floor of
    the mean training target view."""
    metrics = ['nvs/psnr', 'nvs/ssim', 'nvs/psnr_objects', 'nvs/ssim_objects']
    digits = {'nvs/psnr': 2, 'nvs/psnr_objects': 2, 'nvs/ssim': 3, 'nvs/ssim_objects': 3}
    rows = [[f'`{name}`', *[mean_spread(group[m]['mean'], group[m]['spread'], digits[m]) for m in metrics]]
            for name, group in document['groups'].items()]
    floor = document['mean_image']['metrics']
    rows.append(['mean training target view', *[f'{floor[m]:.{digits[m]}f}' for m in metrics]])
    return table(['encoding', 'PSNR (dB)', 'SSIM', 'PSNR, object pixels', 'SSIM, object pixels'], rows)


def gaussian_codec_cell(row: dict) -> str:
    """Bits per Gaussian / attribute PSNR, and where the report rendered: / rendered PSNR (SSIM)."""
    text = f'{row["bits_per_gaussian"]:.1f} / {row["psnr"]:.1f}'
    if 'render_psnr' in row:
        render_psnr = '∞' if row['render_psnr'] in ('inf', math.inf) else f'{row["render_psnr"]:.1f}'
        text += f' / {render_psnr} ({row["render_ssim"]:.4f})'
    return text


def gaussian_codec_table(reports: dict[str, dict]) -> str:
    """``tools/gaussians/report.py`` of several inputs: bits per Gaussian / attribute PSNR (dB) / rendered PSNR (dB)
    (SSIM) per codec and step scale (the codec variant is the .vgs file's name after the input's stem, without its
    step suffix)."""
    steps = sorted({row['step_scale'] for report in reports.values() for row in report['rows']
                    if row['step_scale'] is not None})
    rows = []
    for path, report in reports.items():
        source = PurePosixPath(report['source']).stem
        variants: dict[str, dict] = {}
        for row in report['rows']:
            stem = PurePosixPath(row['file']).stem.removeprefix(f'{source}_')
            variants.setdefault(re.sub(r'_s[0-9.]+$', '', stem), {})[row['step_scale']] = row
        first = f'`{PurePosixPath(path).stem}` ({report["gaussians"]} Gaussians)'
        for variant, by_step in variants.items():
            cells = [gaussian_codec_cell(row) for row in by_step.values()]
            if None not in by_step:
                cells = [gaussian_codec_cell(by_step[s]) if s in by_step else '–' for s in steps]
            rows.append([first, variant, *cells, *([''] * (len(steps) - len(cells)))])
            first = ''
    return table(['input', 'codec', *[f'step {s:g}' for s in steps]], rows)
