"""Every generated block a markdown file may hold: its marker name, the files it is built from and how.

A file (README.md, docs/*.md) carries ``<!-- NAME:start -->`` / ``<!-- NAME:end -->`` for the blocks it shows;
``tools/update_readme.py`` fills each with its table and a stamp naming the source files with the date and commit
of their runs.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vispe.reporting import benchmark_tables as bench
from vispe.reporting import result_tables as results
from vispe.reporting.headline import HEADLINE_SOURCES, headline_table
from vispe.reporting.sources import Sources
from vispe.reporting.three_cell import three_cell_table

PETR_EVALUATIONS = ['models/petr_mv-scenes_sizes.json', 'models/petr_mv-scenes_zoom.json',
                    'models/petr_mv-scenes_rig2.json', 'models/petr_mv-scenes_gta_sizes.json',
                    'models/petr_mv-scenes_gta_zoom.json', 'models/petr_mv-scenes_gta_rig2.json',
                    'models/petr_mv-scenes_per-class*.json']
DETECTION_METRICS = [('COCO box mAP', 'bbox_mAP'), ('mAP at IoU 0.5', 'bbox_mAP_50')]
GAUSSIAN_REPORTS = ['models/gaussians_motorcycle-init.json', 'models/gaussians_motorcycle-fit.json',
                    'models/gaussians_mv-scene0-init.json', 'models/gaussians_mv-scene0-fit.json']


@dataclass(frozen=True)
class Block:
    """A generated block: ``render(sources, files)`` builds its markdown from ``files`` (the expanded ``patterns``,
    repository-relative); ``registry`` names a non-file origin (its stamp then says so)."""

    name: str
    patterns: list[str]
    render: Callable[[Sources, list[str]], str]
    registry: str | None = None


def caption(document: dict) -> str:
    """What a benchmark JSON measured: its title, or (older JSON without one) its command."""
    command = document['command']
    return document.get('title') or ' '.join(command if isinstance(command, list) else [command])


def vit_benchmarks(sources: Sources) -> list[str]:
    """Every ViT benchmark JSON in benchmarks/ (``tools/benchmark.py`` model mode: rows with ratios to NoPE): a row
    measured again in a newer one is shown there only."""
    return [name for name in sources.expand('benchmarks/*.json')
            if any('ratio_NoPE' in row for row in sources.document(name).get('rows', []))]


def _vit(baseline: str) -> Callable[[Sources, list[str]], str]:
    def render(sources: Sources, files: list[str]) -> str:
        return '\n\n'.join(f'{caption(sources.document(name))}:\n\n' + bench.vit_table(
            sources.document(name), baseline, sources.newer(name, vit_benchmarks(sources))) for name in files)
    return render


def _each(render_one: Callable[[dict], str], captioned: bool = True) -> Callable[[Sources, list[str]], str]:
    def render(sources: Sources, files: list[str]) -> str:
        return '\n\n'.join((f'{caption(sources.document(name))}:\n\n' if captioned else '')
                             + render_one(sources.document(name)) for name in files)
    return render


def _encodings(sources: Sources, files: list[str]) -> str:
    import vispe
    return vispe.list_encodings().markdown()


BLOCKS = {block.name: block for block in [
    Block('encodings', [], _encodings, registry='the encoding registry (`vispe.list_encodings()`)'),
    Block('headline', HEADLINE_SOURCES, lambda sources, files: headline_table(sources)),
    Block('zoo', ['models/*/results.json'],
          lambda sources, files: results.zoo_table({name: sources.document(name) for name in files})),
    Block('detr-extrapolation', ['models/detr_fmnist-det_extrapolation.json'],
          _each(lambda document: '\n\n'.join(f'{title}:\n\n{results.seed_group_table(document, metric)}'
                                               for title, metric in DETECTION_METRICS), captioned=False)),
    Block('petr-map', PETR_EVALUATIONS,
          lambda sources, files: results.multiview_table([sources.document(name) for name in files])),
    Block('petr-nuscenes', PETR_EVALUATIONS,
          lambda sources, files: results.nuscenes_table([sources.document(name) for name in files], height=90)),
    Block('petr-orientation', PETR_EVALUATIONS,
          lambda sources, files: results.orientation_table([sources.document(name) for name in files], height=90)),
    Block('vdetr-sweep', ['models/vdetr_pt-scenes_sweep.json'], _each(results.point_sweep_table, captioned=False)),
    Block('vdetr-rotated-sweep', ['models/vdetr_pt-scenes-rotated_sweep.json'],
          _each(results.point_sweep_table, captioned=False)),
    Block('novel-views', ['models/nvs_mv-scenes.json'], _each(results.novel_view_table, captioned=False)),
    Block('three-cell', ['models/three_cell.json'], _each(three_cell_table, captioned=False)),
    Block('crop-depth', ['models/crops_mv-crops-depth_sweep.json'], _each(results.crop_depth_table, captioned=False)),
    Block('gaussian-codecs', GAUSSIAN_REPORTS,
          lambda sources, files: results.gaussian_codec_table({name: sources.document(name) for name in files})),
    Block('bench-rotary-bias', ['benchmarks/perf_224_vit-s16_cpu1.json', 'benchmarks/perf_512_vit-s16_cpu1.json'],
          _vit('timm (plain ViT)')),
    Block('bench-1024', ['benchmarks/flex_1024_vit-s16_cpu1.json'], _vit('NoPE')),
    Block('bench-defaults', ['benchmarks/all_vit-s16_cpu1.json', 'benchmarks/defaults_1024_vit-s16_cpu1.json'],
          _vit('NoPE')),
    Block('bench-timm-rope', ['benchmarks/rope_vs_timm_vit-s16_cpu1.json'], _vit('timm (plain ViT)')),
    Block('bench-seqpe-loope', ['benchmarks/seqpe_loope_vit-s16_cpu1.json', 'benchmarks/seqpe_eval_vit-s16_cpu1.json'],
          _vit('timm (plain ViT)')),
    Block('bench-rotary-layer', ['benchmarks/rotary_layer_cpu1.json'],
          _each(lambda document: bench.layer_table(document, 'size'))),
    Block('bench-detectors', ['benchmarks/petr_mv-scenes.json'], _each(bench.detector_table)),
    Block('bench-point-layer', ['benchmarks/vdetr_point_layer_forward.json', 'benchmarks/vdetr_point_layer_train.json'],
          _each(lambda document: bench.layer_table(document, 'points'))),
    Block('bench-fps', ['benchmarks/fps_cpu1.json'], _each(bench.fps_table)),
    Block('bench-view-stack', ['benchmarks/gta_view_stack_2x14x14.json', 'benchmarks/gta_view_stack_batch1.json',
                               'benchmarks/gta_view_stack_2x14x14_train.json'], _each(bench.layer_table)),
]}
