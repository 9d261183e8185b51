"""Long jobs show progress on a terminal and stay quiet elsewhere or with --quiet: the benchmark's bar over sizes and
passes, and every long-job command takes --quiet."""
from __future__ import annotations

import importlib
import io
import sys

import pytest

from vispe.cli.main import COMMANDS, DATASET_COMMANDS

TINY_BENCHMARK = ['--arch', 'vit_tiny_patch16_224', '--encodings', 'NoPE', '--sizes', '32', '48', '--batch', '1',
                  '--repeats', '1', '--warmup', '0', '--threads', '1']


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize('quiet', [False, True])
def test_benchmark_shows_its_steps_on_a_terminal_unless_quiet(quiet: bool, monkeypatch, capsys) -> None:
    from vispe.cli import benchmark
    terminal = Terminal()
    monkeypatch.setattr(sys, 'stderr', terminal)
    assert benchmark.main(TINY_BENCHMARK + ['--quiet'] * quiet) == 0
    bar = terminal.getvalue()
    assert ('2/2' in bar and '48 px forward' in bar) != quiet, bar


def test_benchmark_writes_no_bar_into_a_pipe(monkeypatch) -> None:
    from vispe.cli import benchmark
    pipe = io.StringIO()
    monkeypatch.setattr(sys, 'stderr', pipe)
    assert benchmark.main(TINY_BENCHMARK) == 0
    assert 'benchmark' not in pipe.getvalue()


@pytest.mark.parametrize('module', [COMMANDS['benchmark'].module, COMMANDS['eval-resolution'].module,
                                    COMMANDS['compress'].module,
                                    *[command.module for command in DATASET_COMMANDS.values()]])
def test_every_long_job_takes_quiet(module: str) -> None:
    parser = importlib.import_module(f'vispe.cli.{module}').build_parser()
    assert '--quiet' in parser.format_help()
