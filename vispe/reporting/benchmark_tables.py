"""Tables of ``tools/benchmark.py`` JSON: speed (and memory) ratios to the baseline timed in the same run.

Every cell is a ratio of one run: the median over rounds of the model's time over the baseline's in the same round,
the highest round in brackets where the JSON has it, then the peak memory where it was measured. Every table is one
JSON's and names the device it ran on (a table never mixes devices). A ViT table drops the rows that a newer JSON
measured again (same encoding with the same options, size, pass, batch and device): only the newest measurement of a
configuration is shown, and the table says where the dropped rows went.
"""
from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Any

from vispe.engine.benchmark_common import device_name
from vispe.reporting.markdown import megabytes, ratio, table

OPTION = re.compile(r'(\w+)=(.+?)(?= \w+=|$)')
MACHINE_LINE = re.compile(r'machine: (?P<cpu>.+?), (?P<cores>\d+) of \d+ cores(?:, (?P<gpu>[^,]+))?, [^,]+, Python ')
UNRECORDED = 'a CPU, model not recorded (the JSON predates recorded machines)'


def device_of(document: dict) -> str:
    """The device a benchmark JSON's ratios belong to: its ``device``, else what its ``machine`` (a description or,
    in older layer benchmarks, its summary line) says, else that the CPU is not recorded (the oldest JSON)."""
    if document.get('device'):
        return document['device']
    machine = document.get('machine')
    if isinstance(machine, dict):
        return device_name(machine)
    found = MACHINE_LINE.match(machine or '')
    if found:
        return found['gpu'] or f"{found['cpu']}, {found['cores']} cores"
    return UNRECORDED


def device_line(document: dict) -> str:
    """The line under a benchmark table that names its device (a table never mixes devices)."""
    return f'Device: {device_of(document)}.'

BASELINE_PREFIXES = ('timm (plain ViT)', 'plain SDPA', 'no position')


def is_baseline(model: str) -> bool:
    """Baseline and control rows (kept in every table: they show the run's own spread)."""
    return model == 'NoPE' or model.endswith('control') or model.startswith(BASELINE_PREFIXES)


def canonical_model(model: str) -> str:
    """``iRPE method=product mode=contextual on=k`` -> ``iRPE``: a benchmark row's label without the options that
    equal the registered encoding's defaults (labels of unregistered models are returned as they are)."""
    from vispe.registry import ENCODINGS
    type_name, _, options = model.partition(' ')
    encoding = ENCODINGS.module_dict.get(type_name)
    if encoding is None:
        return model
    defaults = {name: parameter.default for name, parameter in inspect.signature(encoding.__init__).parameters.items()
                if parameter.default is not inspect.Parameter.empty}
    kept = [f'{name}={value}' for name, value in OPTION.findall(options)
            if name not in defaults or str(defaults[name]) != value]
    return ' '.join([type_name, *kept])


def batch_of(document: dict) -> int | None:
    """The ``--batch`` of the command that wrote the JSON (a string or an argv list), None if it has none."""
    command = document['command']
    words = command.split() if isinstance(command, str) else list(command)
    return int(words[words.index('--batch') + 1]) if '--batch' in words else None


def measurement_keys(document: dict) -> set[tuple[str, Any, str, int | None, str]]:
    """(canonical encoding, size, pass, batch, device) of every non-baseline row of a ViT benchmark JSON."""
    batch, device = batch_of(document), device_of(document)
    return {(canonical_model(row['model']), row['size'], row.get('pass', 'forward'), batch, device)
            for row in document['rows'] if not is_baseline(row['model'])}


def vit_table(document: dict, baseline: str, newer: Iterable[tuple[str, dict]] = ()) -> str:
    """One row per model, one column per (size, pass): ``× baseline (highest round), peak MB``, and the device; rows
    measured again in a ``newer`` (name, JSON) on the same device are dropped and listed under the table."""
    newer_keys = [(name, measurement_keys(later)) for name, later in newer]
    batch, device = batch_of(document), device_of(document)
    columns: list[tuple[Any, str]] = []
    cells: dict[str, dict[tuple[Any, str], str]] = {}
    moved: dict[str, set[str]] = {}
    for row in document['rows']:
        column = (row['size'], row.get('pass', 'forward'))
        key = (canonical_model(row['model']), *column, batch, device)
        where = [name for name, keys in newer_keys if not is_baseline(row['model']) and key in keys]
        if where:
            moved.setdefault(where[-1], set()).add(f'{row["model"]} at {row["size"]} px')
            continue
        if column not in columns:
            columns.append(column)
        high = row.get(f'ratio_{baseline}_high')
        cell = ratio(row[f'ratio_{baseline}'], high)
        peak = megabytes(row.get('peak_bytes'))
        cells.setdefault(row['model'], {})[column] = cell if peak is None else f'{cell}, {peak}'
    passes = {column[1] for column in columns}
    header = [f'model: × {baseline} (highest round), peak']
    header += [f'{size} px' + (f' {name}' if len(passes) > 1 else '') for size, name in columns]
    rows = [[model, *[by_column.get(column, '–') for column in columns]] for model, by_column in cells.items()]
    notes = [f'Measured again by the newer run `{name}`, dropped here: {", ".join(sorted(labels))}.'
             for name, labels in moved.items()]
    return '\n\n'.join([table(header, rows), device_line(document), *notes])


def detector_table(document: dict) -> str:
    """``tools/benchmark.py --detectors``: time and ratio to the first config, the camera encoding's share."""
    baseline = document['baseline']
    rows = [[row['model'], 'x'.join(map(str, row['image_size'])), f'{row["seconds"] * 1e3:.1f}',
             ratio(row['ratio_to_baseline']), f'{row["encoding_share"]:.1%}'] for row in document['rows']]
    return '\n\n'.join([table(['config', 'image', 'ms', f'× {baseline}', 'encoding share'], rows),
                         device_line(document)])


def layer_table(document: dict, label: str = 'layout') -> str:
    """``--point-layer`` / ``--view-stack`` / ``--layer``: time and ratio (highest round) per model, with the peak
    memory where measured."""
    rows = []
    for row in document['rows']:
        high = row.get('ratio_high')
        value = row['ratio'] if 'ratio' in row else row['ratio_plain SDPA']
        peak = megabytes(row.get('decoder8_train_peak_bytes', row.get('peak_bytes')))
        rows.append([row['model'], str(row.get(label, '')), f'{row["seconds"] * 1e3:.1f}', ratio(value, high),
                     peak or '–'])
    peak_name = '8-layer decoder training peak' if 'decoder8_train_peak_bytes' in document['rows'][0] else 'peak'
    return '\n\n'.join([table(['model', label, 'ms', '× first row (highest round)', peak_name], rows),
                         device_line(document)])


def fps_table(document: dict) -> str:
    """``--fps``: time and ratio to the torch loop (highest round) per backend, whether its indices equal the loop's,
    and the machine they ran on."""
    rows = [[row['model'], row.get('runs_on', row.get('device')), f'{row["seconds"] * 1e3:.1f}',
             ratio(row['ratio'], row.get('ratio_high')),
             {None: '(baseline)', True: 'yes', False: '**no**'}[row['same_indices']]] for row in document['rows']]
    return '\n\n'.join([table(['backend', 'runs on', 'ms', '× torch loop (highest round)', 'same indices'], rows),
                         device_line(document)])
