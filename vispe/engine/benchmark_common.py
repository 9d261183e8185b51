"""What vispe's benchmarks share: interleaved timing, per-round ratios, the machine they ran on, tables and
atomic output files.

Timings are medians of interleaved repeats (every run once per round), so slow drifts of a shared machine hit
all runs alike; on CUDA each run is bracketed by device synchronisations. A run may also report the seconds of
named sections inside it (e.g. the encoding's part of a detector's forward): ``measure``'s ``sections`` maps a
run's label to a callable that returns, and clears, what the run's last call spent in each section.
"""
from __future__ import annotations

import csv
import io
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from vispe.reporting.provenance import run_stamp
from vispe.text_table import aligned_table

__all__ = ['device_name', 'machine_description', 'machine_summary', 'markdown_table', 'measure', 'synchronize',
           'write_text_atomically']


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing on the CPU."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def measure(runs: Mapping[str, Callable[[], object]], device: torch.device, repeats: int, warmup: int,
            sections: Mapping[str, Callable[[], dict[str, float]]] | None = None) -> dict[str, dict[str, float]]:
    """Median seconds (and CUDA peak bytes) per run, repeats interleaved across runs.

    Args:
        runs: label -> a callable doing one step.
        device: where the runs compute (synchronised around each timed call).
        repeats: timed calls per run (one per round).
        warmup: untimed calls per run before the rounds.
        sections: label -> a callable returning and clearing ``{name: seconds}`` spent in named parts of that
            run's calls; the median of each over the timed calls is returned as ``'<name>_seconds'``.

    Returns:
        label -> ``dict(seconds, samples (the seconds of each round, in order), peak_bytes (NaN off CUDA),
        <name>_seconds...)``.
    """
    sections = sections or {}
    times: dict[str, list[float]] = {label: [] for label in runs}
    parts: dict[str, dict[str, list[float]]] = {label: {} for label in runs}
    peaks: dict[str, float] = {}
    for label, run in runs.items():
        for _ in range(warmup):
            run()
        if device.type == 'cuda':
            torch.cuda.reset_peak_memory_stats(device)
            run()
            synchronize(device)
            peaks[label] = torch.cuda.max_memory_allocated(device)
    for _ in range(repeats):
        for label, run in runs.items():
            take = sections.get(label)
            synchronize(device)
            if take is not None:
                take()  # drop what warm-up and earlier untimed calls left
            start = time.perf_counter()
            run()
            synchronize(device)
            times[label].append(time.perf_counter() - start)
            if take is not None:
                for name, seconds in take().items():
                    parts[label].setdefault(name, []).append(seconds)
    return {label: dict(seconds=statistics.median(values), samples=values, peak_bytes=peaks.get(label, float('nan')),
                        **{f'{name}_seconds': statistics.median(seconds) for name, seconds in parts[label].items()})
            for label, values in times.items()}


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    cpuinfo = Path('/proc/cpuinfo')
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_description(device: torch.device) -> dict[str, Any]:
    """The machine a benchmark ran on: CPU model, logical cores and those this process may use, the GPU when the
    device is CUDA, OS, Python, torch and its thread count, and the 1-minute load average (a shared machine shows
    here)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    return dict(cpu=_cpu_model(), logical_cores=os.cpu_count(), usable_cores=usable,
                gpu=torch.cuda.get_device_name(device) if device.type == 'cuda' else None,
                platform=platform.platform(), python=platform.python_version(), torch=torch.__version__,
                threads=torch.get_num_threads(),
                load_average_1min=os.getloadavg()[0] if hasattr(os, 'getloadavg') else None)


def device_name(machine: dict[str, Any]) -> str:
    """The device a ratio belongs to: the GPU's name, or the CPU's model and the cores this process could use
    (``NVIDIA H100 80GB HBM3``, ``AMD EPYC, 2 cores``)."""
    return machine['gpu'] or f"{machine['cpu']}, {machine['usable_cores']} cores"


def machine_summary(machine: dict[str, Any]) -> str:
    """One line of :func:`machine_description` (with ``load_average_1min_after`` when measured)."""
    gpu = f", {machine['gpu']}" if machine.get('gpu') else ''
    loads = [machine.get(key) for key in ('load_average_1min', 'load_average_1min_after')]
    load = '' if loads[0] is None else f'; 1-minute load average {loads[0]:.2f} before' + (
        '' if loads[1] is None else f', {loads[1]:.2f} after')
    return (f"machine: {machine['cpu']}, {machine['usable_cores']} of {machine['logical_cores']} cores{gpu}, "
            f"{machine['platform']}, Python {machine['python']}, torch {machine['torch']}, {machine['threads']} "
            f"threads{load}")


def markdown_table(lines: list[list[str]]) -> str:
    """A markdown table; every column but the second (the row's name) right-aligned."""
    numeric = [i for i, cell in enumerate(lines[1]) if i != 1] if len(lines) > 1 else []
    rule = ['---:' if i in numeric else '---' for i in range(len(lines[0]))]
    return '\n'.join('| ' + ' | '.join(line) + ' |' for line in [lines[0], rule, *lines[1:]])


def write_text_atomically(path: Path, text: str) -> Path:
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path`` (no half-written file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f'.{path.name}.', suffix='.tmp', dir=path.parent)
    try:
        with os.fdopen(handle, 'w', newline='') as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def round_ratios(result: dict, base: dict) -> dict[str, float]:
    """A layer benchmark's ratio to its baseline: the median over rounds of the per-round ratio, and the highest."""
    ratios = [seconds / base_seconds for seconds, base_seconds in zip(result['samples'], base['samples'])]
    return dict(ratio=statistics.median(ratios), ratio_high=max(ratios))


def report_table(out: Path | None, command: str, title: str, machine: dict[str, Any], rows: list[dict],
                 cells: list[list[str]], note: str | None = None) -> None:
    """Print a benchmark's table; with ``out``, write out.json (command, device, machine, note, rows), out.md (with
    the machine's line) and out.csv (the table's cells and a ``device`` column). ``machine``:
    :func:`machine_description`; ``note``: a line for the report (``--note``, e.g. that the machine was shared)."""
    note_line = [f'note: {note}'] if note else []
    summary, device = machine_summary(machine), device_name(machine)
    print(title, summary, *note_line, aligned_table(cells), sep='\n')
    if out:
        write_text_atomically(out.with_suffix('.json'), json.dumps(dict(command=command, **run_stamp(), title=title,
                                                                        device=device, machine=machine, note=note,
                                                                        rows=rows), indent=1))
        write_text_atomically(out.with_suffix('.md'), '\n\n'.join([title, f'`{command}`', summary, *note_line,
                                                                   markdown_table(cells)]) + '\n')
        write_csv(out.with_suffix('.csv'), [dict(zip(cells[0], line)) for line in cells[1:]], device)


def write_csv(path: Path, rows: list[dict[str, Any]], device: str) -> Path:
    """Rows as CSV (atomically), each with the ``device`` it was measured on as its last column."""
    rows = [{**row, 'device': device} for row in rows]
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return write_text_atomically(path, table.getvalue())
