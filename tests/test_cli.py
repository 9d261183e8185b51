"""The `vispe` command (vispe.cli.main) and packaged configs (`vispe::<path>`): the listing, unknown names, each
tool's help as `vispe <command>` and as `python tools/<name>.py`."""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import mmengine
import pytest

from vispe.cli.main import COMMANDS, DATASET_COMMANDS, main
from vispe.configs import CONFIG_ROOT, UnknownConfigError, packaged_configs, resolve_config
from vispe.engine import load_config

from .conftest import REPO_ROOT

TOOLS = {**{name: command.module for name, command in COMMANDS.items() if command.module},
         **{f'dataset {name}': command.module for name, command in DATASET_COMMANDS.items()}}
CONFIG = 'vit/vit-t4_rope-mixed_fmnist-28.py'


def test_no_arguments_lists_every_subcommand(capsys) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    for name, command in COMMANDS.items():
        assert f'  {name} ' in out and command.summary in out


def test_unknown_subcommand_names_the_closest(capsys) -> None:
    assert main(['trian']) == 2
    assert "unknown command 'trian'. Did you mean 'train'?" in capsys.readouterr().err
    assert main(['dataset', 'point-scene']) == 2
    assert "Did you mean 'point-scenes'" in capsys.readouterr().err


@pytest.mark.parametrize('argv', [['train', '--help'], ['eval-resolution', '--help'], ['dataset', 'point-scenes', '-h']])
def test_subcommand_help_is_the_tools_own(argv, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f'usage: vispe {" ".join(argv[:-1])} ')


@pytest.mark.parametrize('command', sorted(TOOLS))
def test_tool_script_runs_the_package_command(command: str) -> None:
    """tools/<name>.py calls the main of vispe.cli.<name>, whose parser is `vispe <command>`'s."""
    module_name = TOOLS[command]
    script = REPO_ROOT / 'tools' / f'{module_name.replace(".", "/")}.py'
    assert f'from vispe.cli.{module_name} import main\n' in script.read_text()
    module = importlib.import_module(f'vispe.cli.{module_name}')
    assert module.build_parser().prog == f'vispe {command}'


@pytest.mark.slow
@pytest.mark.parametrize('command', ['vis-encoding', 'dataset fmnist-detection'])
def test_tool_script_and_command_print_the_same_help(command: str) -> None:
    script = REPO_ROOT / 'tools' / f'{TOOLS[command].replace(".", "/")}.py'
    from_script = subprocess.run([sys.executable, str(script), '--help'], capture_output=True, text=True)
    from_command = subprocess.run([sys.executable, '-m', 'vispe', *command.split(), '--help'], capture_output=True,
                                  text=True)
    assert from_script.returncode == from_command.returncode == 0, from_script.stderr + from_command.stderr
    assert from_script.stdout == from_command.stdout and from_script.stdout.startswith(f'usage: vispe {command}')


def test_list_prints_encodings_and_configs(capsys) -> None:
    import vispe
    assert main(['list']) == 0
    out = capsys.readouterr().out
    assert all(info.name in out for info in vispe.list_encodings()) and f'vispe::{CONFIG}' in out
    assert main(['list', 'configs', 'detr/*rope*']) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert lines and all(line.strip().startswith('vispe::detr/') and 'rope' in line for line in lines)
    assert main(['list', 'encodings']) == 0
    assert 'vispe::' not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(['list', 'configs', 'no-such-config'])
    assert "no packaged config matches 'no-such-config'" in capsys.readouterr().err


def test_packaged_configs_are_the_repository_configs() -> None:
    assert CONFIG_ROOT.resolve() == (REPO_ROOT / 'configs').resolve()
    on_disk = sorted(p.relative_to(REPO_ROOT / 'configs').as_posix() for p in (REPO_ROOT / 'configs').rglob('*.py'))
    assert packaged_configs(include_bases=True) == on_disk
    assert CONFIG in packaged_configs() and not any(name.startswith('_base_/') for name in packaged_configs())


def test_config_fromfile_and_load_config_read_packaged_names(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # not the checkout
    cfg = mmengine.Config.fromfile(f'vispe::{CONFIG}')
    assert cfg.model.backbone.encoding.type == 'RoPEMixed'
    assert load_config(f'vispe::{CONFIG}').work_dir == 'work_dirs/vit-t4_rope-mixed_fmnist-28'
    (tmp_path / 'mine.py').write_text(f"_base_ = ['vispe::{CONFIG}']\ntrain_cfg = dict(max_epochs=1)\n")
    mine = mmengine.Config.fromfile('mine.py')  # mmengine's own `pkg::` resolution of a base
    assert mine.model.backbone.encoding.type == 'RoPEMixed' and mine.train_cfg.max_epochs == 1


def test_unknown_packaged_config_names_the_closest() -> None:
    with pytest.raises(UnknownConfigError, match=f"Did you mean 'vispe::{CONFIG}'"):
        load_config('vispe::vit/vit-t4_rope-mixd_fmnist-28.py')
    with pytest.raises(UnknownConfigError, match='vispe list configs'):
        mmengine.Config.fromfile('vispe::nothing/like/this.py')
    assert resolve_config('configs/' + CONFIG) == Path('configs/' + CONFIG)  # paths pass unchanged


def documented_commands() -> list[tuple[str, str]]:
    """(file, command line) of every line in a code block of README.md and docs/ that runs ``vispe <command>``."""
    found = []
    for page in [REPO_ROOT / 'README.md', *sorted((REPO_ROOT / 'docs').rglob('*.md'))]:
        for block in re.findall(r'```(?:bash|console|sh)?\n(.*?)```', page.read_text(), flags=re.S):
            found += [(page.relative_to(REPO_ROOT).as_posix(), line.strip()) for line in block.splitlines()
                      if re.match(r'\s*vispe [a-z]', line)]
    return found


def test_the_docs_name_real_subcommands_and_packaged_configs() -> None:
    commands = documented_commands()
    assert len(commands) > 20
    for page, line in commands:
        words = line.split()
        assert words[1] in COMMANDS, f'{page}: `{line}` names no vispe subcommand'
        if words[1] == 'dataset':
            assert words[2] in DATASET_COMMANDS, f'{page}: `{line}` names no data set'
        for name in re.findall(r'vispe::[\w./-]+', line):
            resolve_config(name)



AFTER_CONFIG = {'test': ['missing.pth'], 'export': ['--out', 'model.onnx'], 'vis-attention': ['missing.pth', '--sizes',
                '28'], 'vis-positions': ['missing.pth'], 'vis-nvs': ['missing.pth'], 'nvs-mean-image': [],
                'infer-points': ['missing.pth', 'scan.npy']}


def parse_error(module, argv: list[str], capsys) -> str:
    """What the tool's argument parsing printed to stderr (empty when it accepted ``argv``)."""
    try:
        module.parse_args(argv)
    except SystemExit:
        pass
    return capsys.readouterr().err


@pytest.mark.parametrize('command', sorted(AFTER_CONFIG))
def test_tools_taking_a_config_take_packaged_names(command: str, capsys) -> None:
    """`vispe test vispe::...` accepts the packaged name (any error is about another argument); an unknown packaged
    name is refused with the closest ones."""
    module = importlib.import_module(f'vispe.cli.{COMMANDS[command].module}')
    assert 'config vispe::' not in parse_error(module, [f'vispe::{CONFIG}', *AFTER_CONFIG[command]], capsys)
    error = parse_error(module, [f'vispe::{CONFIG[:-4]}x.py', *AFTER_CONFIG[command]], capsys)
    assert f"config vispe::{CONFIG[:-4]}x.py" in error and f"Did you mean 'vispe::{CONFIG}'" in error
