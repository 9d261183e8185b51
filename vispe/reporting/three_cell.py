"""The Three Cell Experiment's outputs: a JSON of every run, the table it gives, and a bar plot per family."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from vispe.reporting.markdown import mean_spread, table
from vispe.reporting.provenance import run_stamp

FAMILIES = ('distance', 'orientation', 'area', 'vector_sum', 'average')
HEADER = ('encoding', 'seeds', 'distance', 'orientation', 'area', 'vector sum', 'average')


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean and spread (max − min) of each family over the seeds of one encoding."""
    summary: dict[str, Any] = dict(seeds=[run['seed'] for run in runs], encoding=runs[0]['encoding'],
                                   mean={}, spread={})
    for family in FAMILIES:
        values = [run['scores'][family] for run in runs]
        summary['mean'][family] = sum(values) / len(values)
        summary['spread'][family] = max(values) - min(values) if len(values) > 1 else None
    summary['runs'] = list(runs)
    return summary


def three_cell_table(document: dict[str, Any]) -> str:
    """The markdown table of a Three Cell JSON: per-family accuracy (%), mean ± spread of the seeds, rows by average."""
    rows = sorted(document['encodings'].items(), key=lambda item: -item[1]['mean']['average'])
    return table(HEADER, [[f'`{label}`', str(len(entry['seeds'])),
                           *(mean_spread(entry['mean'][f], entry['spread'][f], 1) for f in FAMILIES)]
                          for label, entry in rows])


def plot_three_cell(document: dict[str, Any], path: Path) -> Path:
    """Grouped bars: one group per family, one bar per encoding (seed mean, spread as an error bar)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np
    entries = sorted(document['encodings'].items(), key=lambda item: -item[1]['mean']['average'])
    positions = np.arange(len(FAMILIES))
    width = 0.8 / max(len(entries), 1)
    figure, axes = plt.subplots(figsize=(max(8.0, 1.2 * len(entries) + 4), 4.5))
    for index, (label, entry) in enumerate(entries):
        means = [entry['mean'][f] for f in FAMILIES]
        spreads = [(entry['spread'][f] or 0.0) / 2 for f in FAMILIES]
        axes.bar(positions + (index - (len(entries) - 1) / 2) * width, means, width, yerr=spreads, label=label,
                 capsize=2)
    axes.set_xticks(positions, [f.replace('_', ' ') for f in FAMILIES])
    axes.set_ylabel('test accuracy (%)')
    axes.set_ylim(40, 100)
    axes.axhline(50, color='grey', lw=0.5)
    axes.set_title('Three Cell Experiment: ' + document['config'])
    axes.legend(fontsize=7, ncol=2, loc='upper left', bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def write_three_cell_outputs(results: dict[str, list[dict[str, Any]]], out: Path, command: str,
                             config: str) -> list[Path]:
    """``out``.json (runs and summaries, command, config, date, commit), ``out``.md (the table) and ``out``.png."""
    from vispe.evaluation.sweep import write_json
    from vispe.files import write_atomically
    document = dict(command=command, config=config, **run_stamp(),
                    encodings={label: summarise(runs) for label, runs in results.items()})
    out = Path(out)
    json_path = write_atomically(out.with_suffix('.json'), lambda temporary: write_json(temporary, document))
    md_path = write_atomically(out.with_suffix('.md'),
                               lambda temporary: temporary.write_text(three_cell_table(document) + '\n'))
    png_path = write_atomically(out.with_suffix('.png'), lambda temporary: plot_three_cell(document, temporary))
    return [json_path, md_path, png_path]
