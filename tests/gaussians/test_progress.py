"""Long jobs show progress on a terminal and stay quiet elsewhere: the codec's training bar, and the rule
(``progress_wanted``) the tools apply to ``--quiet`` and stderr."""
from __future__ import annotations

import io

from vispe.engine.arguments import progress_wanted
from vispe.gaussians.codec import CodecConfig, compress

from .test_codec import varied_cloud

TINY = dict(steps=3, batch=64, tri_channels=2, tri_resolution=4, hidden=8)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal_unless_quiet() -> None:
    assert progress_wanted(False, Terminal())
    assert not progress_wanted(True, Terminal())
    assert not progress_wanted(False, io.StringIO())


def test_training_the_context_shows_its_steps_and_bits(capsys) -> None:
    compress(varied_cloud(120), CodecConfig(**TINY), progress=True)
    bar = capsys.readouterr().err
    assert 'training the context' in bar and '3/3' in bar and 'bits per Gaussian' in bar


def test_no_bar_by_default(capsys) -> None:
    compress(varied_cloud(120), CodecConfig(**TINY))
    assert capsys.readouterr().err == ''
