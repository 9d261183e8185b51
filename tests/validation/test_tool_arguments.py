"""Every tool refuses a bad argument before any work, naming the argument, the value seen and the fix.

The tools run in-process (their ``main()`` with ``sys.argv`` set); argparse refusals exit with status 2
and print to stderr, refusals that need the built model raise :class:`InvalidArgument`. Each case also
checks that no file was written and that the work (training, evaluation, image loading) never began.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from mmengine.config import Config

from vispe.engine.arguments import (InvalidArgument, check_distinct, check_indices, check_query, config_dict,
                                    grid_query, non_negative_int, positive_float, positive_int, run_main,
                                    unit_fraction, writable_output)
from vispe.registry import MODELS

from ..conftest import REPO_ROOT
from ..helpers import load_tool
from ..test_eval_resolution import make_work_dir

VIT_CONFIG = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py'
DETR_CONFIG = REPO_ROOT / 'configs' / 'detr' / 'detr-r18_sine_fmnist-det.py'
def files_under(root: Path) -> set[Path]:
    return {path for path in root.rglob('*') if path.is_file()}


def forbid(monkeypatch: pytest.MonkeyPatch, module: ModuleType, *names: str) -> None:
    """Make the module's work functions fail the test if a refused command reaches them."""
    for name in names:
        def called(*args, _name=name, **kwargs):
            raise AssertionError(f'{_name} ran although the arguments were refused')
        monkeypatch.setattr(module, name, called)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary working directory (default outputs land there) with a file that blocks folder creation."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'blocker').write_text('a file, not a folder')
    (tmp_path / 'stem.json').mkdir()
    return tmp_path


def expand(argv: list[str], root: Path) -> list[str]:
    return [item.format(tmp=root, vit=VIT_CONFIG) for item in argv]


BLOCKED = '{tmp}/blocker/sub/out'
BLOCKED_MESSAGE = ['--out', 'blocker/sub', 'cannot create the folder', 'Not a directory', 'choose a path']

CASES = {
    'eval_resolution': [
        (['run', '--sizes', '0', '28'], ['argument --sizes', "'0'", 'not a positive integer', 'give a whole number']),
        (['run', '--sizes', '28', 'x'], ['argument --sizes', "'x'", 'not a positive integer']),
        (['run', '--sizes', '28', '--subset', '0'], ['argument --subset', "'0'", 'at least 1']),
        (['run', '--sizes', '28', '--batch-size', '-8'], ['argument --batch-size', "'-8'", 'at least 1']),
        (['run', '--sizes', '28', '56', '28'], ['--sizes 28 56 28', '28 given more than once', 'give each value once']),
        (['run', '--sizes', '28', '--out', BLOCKED], BLOCKED_MESSAGE),
        (['run', '--sizes', '28', '--out', '{tmp}/stem'], ['--out', 'stem.json is a folder', 'give a file path']),
    ],
    'vis_attention': [
        (['{vit}', 'x.pth', '--sizes', '28', '0'], ['argument --sizes', "'0'", 'at least 1']),
        (['{vit}', 'x.pth', '--sizes', '28', '--query', '3;4'], ['argument --query', "'3;4'", 'ROW,COL']),
        (['{vit}', 'x.pth', '--sizes', '28', '--query', '1,-2'], ['argument --query', "'1,-2'", 'ROW,COL']),
        (['{vit}', 'x.pth', '--sizes', '28', '--decoder-query', '-1'], ['argument --decoder-query', "'-1'",
                                                                         'at least 0']),
        (['{tmp}/none.py', 'x.pth', '--sizes', '28'], ['config', 'none.py', 'no such file', 'existing file']),
        (['{vit}', 'x.pth', '--sizes', '28', '--out', BLOCKED], BLOCKED_MESSAGE),
    ],
    'vis_encoding': [
        (['--grid', '0', '14'], ['argument --grid', "'0'", 'at least 1']),
        (['--heads', '0'], ['argument --heads', "'0'", 'at least 1']),
        (['--embed-dim', '30', '--heads', '4'], ['--embed-dim 30', 'not divisible by --heads 4', 'multiple of 4']),
        (['--grid', '14', '14', '--query', '20,1'], ['--query 20,1', 'outside the 14x14 grid', 'ROW from 0 to 13']),
        (['--query', 'cls'], ['--query cls', 'no class token', "'center'"]),
        (['--encodings', 'SinCos2D', '{{"type": "RoPEAxial"'], ['argument --encodings', 'not valid JSON',
                                                                 'JSON object with a "type" key']),
        (['--out', BLOCKED], BLOCKED_MESSAGE),
    ],
    'benchmark': [
        (['--sizes', '224', '0'], ['argument --sizes', "'0'", 'at least 1']),
        (['--batch', '0'], ['argument --batch', "'0'", 'at least 1']),
        (['--repeats', '0'], ['argument --repeats', "'0'", 'at least 1']),
        (['--warmup', '-1'], ['argument --warmup', "'-1'", 'at least 0']),
        (['--threads', '0'], ['argument --threads', "'0'", 'at least 1']),
        (['--configs', '{{"on": "k"}}'], ['argument --configs', 'not a config with a "type"', 'JSON object']),
        (['--out', BLOCKED], BLOCKED_MESSAGE),
        (['--out', '{tmp}/stem'], ['--out', 'stem.json is a folder']),
    ],
    'test': [
        (['{tmp}/none.py', 'x.pth'], ['config', 'none.py', 'no such file', 'existing file']),
    ],
    'demo': [
        (['--epochs', '1'], ['--epochs 1', 'warm-up epoch', 'give at least 2']),
        (['--epochs', 'two'], ['argument --epochs', "'two'", 'not a positive integer']),
        (['--train-subset', '0'], ['argument --train-subset', "'0'", 'at least 1']),
        (['--test-subset', '-5'], ['argument --test-subset', "'-5'", 'at least 1']),
        (['--sizes', '28', '0'], ['argument --sizes', "'0'", 'at least 1']),
        (['--sizes', '28', '28'], ['--sizes 28 28', 'given more than once']),
        (['--sizes', '28', '42'], ['--sizes 28 42: 42 not a multiple of the patch size 4', 'give multiples of 4']),
        (['--encodings', 'ape', 'rope'], ["--encodings rope: No config for ['rope']", 'rope-mixed']),
        (['--image', '{tmp}/none.png'], ['--image', 'none.png', 'no such file']),
        (['--image', 'skimage:nothing'], ['--image skimage:nothing', "no image 'nothing'", 'skimage:astronaut']),
        (['--out', BLOCKED], BLOCKED_MESSAGE),
        (['--work-root', '{tmp}/blocker/wd'], ['--work-root', 'cannot create the folder', 'Not a directory']),
    ],
    'zoo_card': [
        (['{tmp}/wd', '--eval', '{tmp}/eval.json', '--max-mb', '-1'], ['argument --max-mb', "'-1'", 'at least 0']),
        (['{tmp}/none', '--eval', '{tmp}/eval.json'], ['work dir', 'none', 'no such folder']),
        (['{tmp}/untrained', '--eval', '{tmp}/eval.json'], ['work dir', 'untrained', 'has no best.pth']),
        (['{tmp}/wd', '--eval', '{tmp}/none.json'], ['--eval', 'none.json', 'no such file']),
        (['{tmp}/wd', '--eval', '{tmp}/eval.json', '--zoo', '{tmp}'], ['--zoo', 'has no README.md',
                                                                         'create README.md']),
    ],
}


def zoo_inputs(root: Path) -> None:
    """A work dir with a config and best.pth, one without best.pth, an evaluation JSON and a zoo."""
    for name, trained in (('wd', True), ('untrained', False)):
        (root / name).mkdir()
        (root / name / f'{name}.py').write_text('model = dict()\n')
        if trained:
            (root / name / 'best.pth').write_bytes(b'weights')
    (root / 'eval.json').write_text('{"runs": []}')
    (root / 'zoo').mkdir()
    (root / 'zoo' / 'README.md').write_text('# zoo\n')


@pytest.mark.parametrize('name, argv, fragments', [(name, argv, fragments) for name, cases in CASES.items()
                                                   for argv, fragments in cases],
                         ids=[f'{name}: {" ".join(argv)}' for name, cases in CASES.items() for argv, _ in cases])
def test_refused_at_parse_time(name, argv, fragments, workspace, monkeypatch, capsys) -> None:
    if name == 'zoo_card':
        zoo_inputs(workspace)
        argv = argv if '--zoo' in argv else [*argv, '--zoo', '{tmp}/zoo']
    module = load_tool(name)
    forbid(monkeypatch, module, *{'eval_resolution': ['evaluate', 'resolve_run'], 'vis_attention': ['load_image'],
                                  'benchmark': ['measure'], 'test': ['build_runner'], 'demo': ['train'],
                                  'zoo_card': ['card'], 'vis_encoding': ['embedding_similarity']}[name])
    before = files_under(workspace)
    monkeypatch.setattr(sys, 'argv', [f'{name}.py', *expand(argv, workspace)])
    with pytest.raises(SystemExit) as exited:
        module.main()
    assert exited.value.code == 2
    error = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in error, (fragment, error)
    assert files_under(workspace) == before


@pytest.mark.parametrize('argv, fragments', [
    (['--train', '0'], ['argument --train', "'0'", 'at least 1']),
    (['--val', '-1'], ['argument --val', "'-1'", 'at least 1']),
    (['--canvas', '0'], ['argument --canvas', "'0'", 'at least 1']),
    (['--min-objects', '0'], ['argument --min-objects', "'0'", 'at least 1']),
    (['--min-objects', '3', '--max-objects', '2'], ['--min-objects 3', 'larger than --max-objects 2', 'give']),
    (['--min-side', '40', '--max-side', '32'], ['--min-side 40', 'larger than --max-side 32', 'give']),
    (['--max-side', '80'], ['--max-side 80', 'larger than --canvas 64', 'a larger --canvas']),
    (['--max-iou', '1.5'], ['argument --max-iou', "'1.5'", 'from 0 to 1']),
    (['--max-iou', 'nan'], ['argument --max-iou', "'nan'", 'from 0 to 1']),
    (['--threshold', '255'], ['--threshold 255', 'no grey level', 'from 0 to 254']),
    (['--root', '{tmp}/none'], ['--root', 'none', 'no such folder']),
    (['--out', BLOCKED], BLOCKED_MESSAGE),
])
def test_detection_converter_refuses(argv, fragments, workspace, capsys) -> None:
    module = load_tool('dataset_converters/fmnist_detection')
    argv = expand(argv, workspace)
    argv = argv if '--out' in argv else [*argv, '--out', str(workspace / 'det')]
    with pytest.raises(SystemExit) as exited:
        module.main(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in error, (fragment, error)
    assert files_under(workspace) == {workspace / 'blocker'} and not (workspace / 'det').exists()


def test_test_tool_refuses_a_work_dir_it_cannot_create(workspace, monkeypatch) -> None:
    module = load_tool('test')
    forbid(monkeypatch, module, 'build_runner')
    monkeypatch.setattr(sys, 'argv', ['test.py', str(VIT_CONFIG), 'x.pth', '--work-dir',
                                      str(workspace / 'blocker' / 'wd')])
    with pytest.raises(InvalidArgument, match=r'--work-dir .*blocker/wd: cannot create the folder .*Not a directory'):
        module.main()


@pytest.fixture(scope='module')
def detr_checkpoint(tmp_path_factory) -> tuple[Path, Path]:
    """The smallest DETR config of the repository and a checkpoint of its freshly built model."""
    root = tmp_path_factory.mktemp('detr-args')
    cfg = Config.fromfile(str(DETR_CONFIG))
    torch.manual_seed(0)
    torch.save({'state_dict': MODELS.build(cfg.model).state_dict()}, root / 'best.pth')
    return DETR_CONFIG, root / 'best.pth'


def refused_after_build(argv: list[str], out: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """vis_attention refuses ``argv`` once the model is built, before its checkpoint or any image loads."""
    module = load_tool('vis_attention')
    forbid(monkeypatch, module, 'load_image')
    monkeypatch.setattr(module.vispe, 'load_checkpoint', lambda *args, **kwargs: pytest.fail('checkpoint loaded'))
    monkeypatch.setattr(sys, 'argv', ['vis_attention.py', *argv, '--out', str(out)])
    with pytest.raises(InvalidArgument) as refused:
        module.main()
    assert not out.exists()
    return str(refused.value)


@pytest.mark.parametrize('extra, message', [
    (['--layers', '0', '4'], "--layers 0 4: 4 outside the model's 4 attention layers; give indices from -4 to 3 "
                             '(negative ones count from the end).'),
    (['--layers', '-5'], "--layers -5: -5 outside the model's 4 attention layers"),
    (['--query', '7,0'], '--query 7,0: the patch is outside the 7x7 training grid; give ROW from 0 to 6'),
    (['--decoder-query', '0'], '--decoder-query 0: this model is a classifier and the option is for detectors'),
])
def test_vis_attention_checks_the_classifier_before_any_image(extra, message, tmp_path, monkeypatch) -> None:
    work_dir = make_work_dir(tmp_path, 'ape')
    argv = [str(next(work_dir.glob('*.py'))), str(work_dir / 'best.pth'), '--sizes', '28', '56', *extra]
    assert message in refused_after_build(argv, tmp_path / 'attention.png', monkeypatch)


@pytest.mark.parametrize('extra, message', [
    (['--decoder-query', '10'], "--decoder-query 10: 10 outside the model's 10 object queries; give indices from 0 "
                                'to 9.'),
    (['--decoder-query', '2', '--layers', '3'], "--layers 3: 3 outside the model's 3 decoder layers"),
    (['--layers', '-4'], "--layers -4: -4 outside the model's 3 attention layers"),
    (['--query', 'cls'], '--query cls: this model has no class token'),
])
def test_vis_attention_checks_the_detector_before_any_image(extra, message, detr_checkpoint, tmp_path,
                                                            monkeypatch) -> None:
    config, checkpoint = detr_checkpoint
    argv = [str(config), str(checkpoint), '--sizes', '64', *extra]
    assert message in refused_after_build(argv, tmp_path / 'attention.png', monkeypatch)


def test_argument_types_name_the_value_and_the_fix() -> None:
    assert positive_int('28') == 28 and non_negative_int('0') == 0 and positive_float('0.5') == 0.5
    assert unit_fraction('1') == 1.0 and grid_query('7,3') == '7,3' and grid_query('cls') == 'cls'
    assert config_dict('{"type": "iRPE", "on": "k"}') == {'type': 'iRPE', 'on': 'k'}
    for parse, text, expected in ((positive_int, '0', "'0' is not a positive integer; give a whole number of at "
                                                       'least 1.'),
                                  (positive_int, '2.5', "'2.5' is not a positive integer"),
                                  (non_negative_int, '-1', "'-1' is not a non-negative integer"),
                                  (positive_float, 'inf', "'inf' is not a positive number; give a finite number"),
                                  (positive_float, '0', "'0' is not a positive number"),
                                  (grid_query, '7', "'7' is not a query; give 'cls', 'center' or ROW,COL"),
                                  (config_dict, '[1]', "'[1]' is not a config with a \"type\"")):
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            parse(text)
        assert str(refused.value).startswith(expected), str(refused.value)


def test_checks_against_counts_grids_and_the_file_system(tmp_path) -> None:
    assert check_indices('--layers', [0, -1, -4, 3], 4, 'attention layers') == [0, -1, -4, 3]
    with pytest.raises(InvalidArgument, match=r'give indices from 0 to 9\.$'):
        check_indices('--decoder-query', [-1], 10, 'object queries', negative=False)
    assert check_distinct('--sizes', [28, 56]) == [28, 56]
    assert check_query('--query', '13,13', (14, 14), 1, 'training grid') == '13,13'
    with pytest.raises(InvalidArgument, match=r"--query 3,14: the patch is outside the 4x14 grid; give ROW from 0 to "
                                              r"3 and COL from 0 to 13, or 'center'\."):
        check_query('--query', '3,14', (4, 14), 1)
    out = writable_output(tmp_path / 'a' / 'b' / 'figure.png')
    assert out.parent.is_dir() and not out.exists()
    (tmp_path / 'a' / 'b' / 'figure.png').mkdir()
    with pytest.raises(InvalidArgument, match='is a folder'):
        writable_output(out)
    with pytest.raises(InvalidArgument, match='names a folder, not a file'):
        writable_output(Path('/'), suffixes=('.csv',))


def test_run_main_prints_a_late_refusal_without_a_traceback(monkeypatch, capsys) -> None:
    def main() -> int:
        raise InvalidArgument('--layers', [0, 9], "9 outside the model's 4 attention layers",
                              'give indices from -4 to 3')
    monkeypatch.setattr(sys, 'argv', ['tools/vis_attention.py'])
    with pytest.raises(SystemExit) as exited:
        run_main(main)
    assert exited.value.code == 2
    assert capsys.readouterr().err == ("vis_attention.py: error: --layers 0 9: 9 outside the model's 4 attention "
                                       'layers; give indices from -4 to 3.\n')


def test_cfg_options_without_an_equals_sign_are_refused_by_name(capsys) -> None:
    from vispe.engine import add_runner_arguments
    parser = argparse.ArgumentParser(prog='train.py')
    add_runner_arguments(parser)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(['--cfg-options', 'train_cfg.max_epochs=2', 'foo'])
    assert info.value.code == 2
    assert "argument --cfg-options: 'foo' is not KEY=VALUE; write e.g. train_cfg.max_epochs=2" in capsys.readouterr().err
    assert parser.parse_args(['--cfg-options', 'a.b=1']).cfg_options == {'a.b': 1}


def test_train_refuses_a_work_dir_it_cannot_create(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / 'a_file'
    blocker.write_text('')
    train = load_tool('train')
    argv = sys.argv
    sys.argv = ['train.py', str(REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py'), '--work-dir',
                str(blocker / 'run')]
    try:
        with pytest.raises(SystemExit) as info:
            train.run_main(train.main)
    finally:
        sys.argv = argv
    assert info.value.code == 2
    assert f'--work-dir {blocker / "run"}: cannot create the folder' in capsys.readouterr().err


def test_detection_sizes_scale_the_cap_on_the_longer_side() -> None:
    """Before, COCO's max_size=1333 capped every size above it (a 1600 px evaluation ran at 1333 or less)."""
    evaluation = load_tool('eval_resolution')
    cfg = Config.fromfile(str(REPO_ROOT / 'configs' / 'detr' / 'detr-r50_sine_coco.py'))
    assert evaluation.dataset_cfg(cfg, 1600, 'upsample', None)['max_size'] == 2666
    assert evaluation.dataset_cfg(cfg, 800, 'upsample', None)['max_size'] == 1333
    assert evaluation.dataset_cfg(cfg, 400, 'upsample', None)['max_size'] == 666


def test_benchmark_refuses_sizes_off_the_patch_grid_and_unknown_devices(monkeypatch, capsys) -> None:
    benchmark = load_tool('benchmark')
    for argv, fragment in ((['--sizes', '224', '30'], "--sizes 30: not multiples of the patch size 16"),
                           (['--device', 'gpu'], "argument --device: 'gpu' is not a torch device")):
        monkeypatch.setattr(sys, 'argv', ['benchmark.py', *argv])
        with pytest.raises(SystemExit) as info:
            benchmark.parse_args()
        assert info.value.code == 2 and fragment in capsys.readouterr().err


def test_vis_attention_names_a_fashion_mnist_index_beyond_the_split() -> None:
    with pytest.raises(ValueError, match=r'--image fmnist:99999: the Fashion-MNIST test split has 10000 images; give '
                                         r'an index from 0 to 9999'):
        load_tool('vis_attention').load_image('fmnist:99999')
