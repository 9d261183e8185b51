"""The README's headline results: a few figures, each read from its result JSON (the choice of runs is fixed here,
every number comes from the files)."""
from __future__ import annotations

from vispe.reporting.benchmark_tables import device_of
from vispe.reporting.markdown import mean_spread, megabytes, ratio, table
from vispe.reporting.sources import Sources

FLEX_1024 = 'benchmarks/flex_1024_vit-s16_cpu1.json'
ROPE_MIXED_CARD = 'models/vit-t4_rope-mixed_fmnist-28/results.json'
PETR_RIG1 = 'models/petr_mv-scenes_per-class_rig1.json'
NOVEL_VIEWS = 'models/nvs_mv-scenes.json'
CROP_DEPTH = 'models/crops_mv-crops-depth_sweep.json'
HEADLINE_SOURCES = [FLEX_1024, ROPE_MIXED_CARD, PETR_RIG1, NOVEL_VIEWS, CROP_DEPTH]


def _row(document: dict, model: str) -> dict:
    return next(row for row in document['rows'] if row['model'] == model)


def _group(document: dict, label: str) -> dict:
    return next(group for group in document['seed_groups'] if group['label'] == label)


def headline_table(sources: Sources) -> str:
    """Five results, each against its baseline in the same run."""
    flex = sources.document(FLEX_1024)
    lookhere, sdpa = _row(flex, 'LookHere'), _row(flex, 'LookHere kernel=sdpa')
    card = sources.document(ROPE_MIXED_CARD)
    largest = str(card['sizes'][-1])
    petr = sources.document(PETR_RIG1)

    height, width = petr['runs'][0]['train_size']

    def petr_map(label: str) -> str:  # at the training size, the training rig
        result = next(r for r in _group(petr, label)['results']
                      if (r['height'], r['width'], r['rig']) == (height, width, 'config'))
        return mean_spread(result['mean']['nusc/mAP'], result['spread']['nusc/mAP'], 3)
    views = sources.document(NOVEL_VIEWS)['groups']

    def psnr(label: str) -> str:
        return mean_spread(views[label]['nvs/psnr']['mean'], views[label]['nvs/psnr']['spread'], 2)
    crops = sources.document(CROP_DEPTH)

    def tele_absrel(label: str) -> str:
        result = next(r for r in _group(crops, label)['results'] if r['split'] == 'test-tele')
        return mean_spread(result['mean']['depth/absrel'], result['spread']['depth/absrel'], 3)
    rows = [
        [f'ViT-S/16 at {lookhere["size"]} px, LookHere with FlexAttention (time × NoPE, peak memory), '
         f'on {device_of(flex)}',
         f'{ratio(lookhere["ratio_NoPE"])}, {megabytes(lookhere["peak_bytes"])}',
         f'SDPA path: {ratio(sdpa["ratio_NoPE"])}, {megabytes(sdpa["peak_bytes"])}'],
        [f'Fashion-MNIST top-1 % at {largest} px (trained at {card["sizes"][0]}), RoPE-Mixed tuned on minival',
         mean_spread(card['tuned']['top1'][largest], card['tuned']['top1_spread'][largest], 1),
         f'as trained: {mean_spread(card["top1"][largest], card["top1_spread"][largest], 1)}'],
        [f'mv-scenes 3D detection mAP at {height}×{width}, PETR (LID)', petr_map('petr-r18_petr-lid_mv-scenes'),
         f'no 3D PE: {petr_map("petr-r18_nope_mv-scenes")}'],
        ['novel-view PSNR (dB), GTA', psnr('gta'), f'NoPE: {psnr("nope")}'],
        ['crop depth AbsRel at unseen focal lengths (test-tele), KPE dense',
         tele_absrel('vit-t4_kpe-dense_mv-crops-depth'),
         f'crop box without K: {tele_absrel("vit-t4_crop-box_mv-crops-depth")}'],
    ]
    return table(['result', 'vispe', 'baseline (same runs)'], rows)
