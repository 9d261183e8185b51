"""Config files: a syntax error names the file and the line, also deep in a _base_ chain."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vispe.engine import load_config

from ..conftest import REPO_ROOT


def test_syntax_error_in_a_base_names_that_file(tmp_path: Path) -> None:
    (tmp_path / '_base_').mkdir()
    (tmp_path / '_base_' / 'runtime.py').write_text("seed = 0\nmodel = dict(type='X',\n")
    (tmp_path / 'middle.py').write_text("_base_ = ['./_base_/runtime.py']\n")
    (tmp_path / 'top.py').write_text("_base_ = ['./middle.py']\nlr = 0.1\n")
    with pytest.raises(SyntaxError, match=r"Config .*_base_/runtime.py \(a _base_ of .*middle.py\) has a syntax error "
                                          r"at line 2: model = dict\(type='X', \('\(' was never closed\)"):
        load_config(tmp_path / 'top.py')


def test_syntax_error_in_the_config_itself(tmp_path: Path) -> None:
    (tmp_path / 'top.py').write_text("_base_ = ['./missing.py']\nlr = = 0.1\n")
    with pytest.raises(SyntaxError, match=r'Config .*top.py has a syntax error at line 2: lr = = 0.1'):
        load_config(tmp_path / 'top.py')


def test_a_missing_base_names_the_config_and_the_path(tmp_path: Path) -> None:
    (tmp_path / 'top.py').write_text("_base_ = ['../_base_/runtime.py']\n")
    with pytest.raises(FileNotFoundError, match=r"Config .*top.py names _base_ '../_base_/runtime.py', which is not a "
                                                r'file .*relative to'):
        load_config(tmp_path / 'top.py')


def test_a_misspelt_config_key_names_the_closest_argument() -> None:
    from vispe.registry import DATASETS
    with pytest.raises(TypeError, match=r"FashionMNIST has no argument 'image_sise' .*Did you mean 'image_size'\? "
                                        r'It accepts: split, image_size'):
        DATASETS.build(dict(type='FashionMNIST', image_sise=56))


def test_tools_name_the_file(tmp_path: Path, capsys) -> None:
    import runpy
    bad = tmp_path / 'bad.py'
    bad.write_text('model = dict(\n')
    argv = sys.argv
    sys.argv = ['eval_resolution.py', f'{bad}::{tmp_path / "best.pth"}', '--sizes', '28', '--out', str(tmp_path / 'o')]
    try:
        with pytest.raises(SyntaxError, match=f'Config {bad} has a syntax error at line 1'):
            runpy.run_path(str(REPO_ROOT / 'tools' / 'eval_resolution.py'), run_name='__main__')
    finally:
        sys.argv = argv


def test_every_shipped_config_parses() -> None:
    for config in sorted((REPO_ROOT / 'configs').rglob('*.py')):
        load_config(config)


def test_a_misspelt_key_of_a_runner_built_dataset_names_the_closest_argument(tmp_path: Path) -> None:
    """The Runner builds datasets through mmengine's root registry; named_unknown_types still names the key."""
    from vispe.engine import build_runner, named_unknown_types
    cfg = load_config(REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py',
                      {'test_dataloader.dataset.image_sise': 56, 'log_level': 'WARNING'}, tmp_path)
    cfg.experiment_name = 'misspelt_dataset_key'
    with pytest.raises(TypeError, match=r"FashionMNIST has no argument 'image_sise' .*Did you mean 'image_size'"):
        with named_unknown_types():
            build_runner(cfg).test()


def test_a_misspelt_loop_option_names_the_arguments_its_kwargs_reach() -> None:
    """vispe's EpochBasedTrainLoop passes **kwargs on to mmengine's: the message lists the base class's arguments
    (it listed nothing after "It accepts:") and suggests the closest."""
    from vispe.engine.loops import EpochBasedTrainLoop
    from vispe.registry import unknown_argument_error
    error = unknown_argument_error(TypeError("__init__() got an unexpected keyword argument 'max_epoch'"),
                                   EpochBasedTrainLoop)
    assert str(error) == ("EpochBasedTrainLoop has no argument 'max_epoch' (a config key or cfg-option). Did you mean "
                          "'max_epochs'? It accepts: runner, dataloader, max_epochs, val_begin, val_interval, "
                          "dynamic_intervals.")

