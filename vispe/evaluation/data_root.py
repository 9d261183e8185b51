"""``--data-root``: evaluate a config on data kept elsewhere than its ``data_root``, and check the layout first.

A config names its data through a top-level ``data_root`` (``configs/_base_/datasets/imagenet-224.py``:
``'datasets/imagenet'``; ``coco-detr.py``: ``'datasets/coco/'``), from which its datasets' paths are built
(``ImageFolderDataset(root=data_root)``; ``CocoDetection(data_root=data_root + 'val2017/',
ann_file=data_root + 'annotations/instances_val2017.json')`` and the ``CocoMetric``'s ``ann_file``).
:func:`with_data_root` moves every such path of the test (and validation) set and evaluator under a new root, and
:func:`check_layout` says what is missing there, and how to prepare it, before any model runs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmengine.config import Config, ConfigDict

from vispe.engine.arguments import InvalidArgument

# The options of datasets and evaluators that hold paths.
PATH_OPTIONS = ('root', 'data_root', 'ann_file')
# The dataloaders and evaluators a new root applies to.
SECTIONS = (('test_dataloader', 'dataset'), ('val_dataloader', 'dataset'), ('test_evaluator',), ('val_evaluator',))
IMAGENET_HINT = ('ImageNet val must be in ImageFolder layout, one folder per class: <root>/val/<wnid>/<image>.JPEG '
                 '(1000 folders n01440764 ... n15075141). From the official files, put ILSVRC2012_img_val.tar and '
                 'ILSVRC2012_devkit_t12.tar.gz in <root> and run python -c "import torchvision; '
                 'torchvision.datasets.ImageNet(\'<root>\', split=\'val\')", which sorts the 50000 images into '
                 '<root>/val/<wnid>/')
COCO_HINT = ('COCO 2017 must be in its own layout: <root>/val2017/<image>.jpg and '
             '<root>/annotations/instances_val2017.json (unzip val2017.zip and annotations_trainval2017.zip from '
             'cocodataset.org into <root>)')


class DataRootError(ValueError):
    """The config's paths do not derive from its ``data_root``, or the new root lacks what the config reads: the
    ``problem`` and its ``fix``."""

    def __init__(self, problem: str, fix: str) -> None:
        self.problem, self.fix = problem, fix
        super().__init__(f'{problem}; {fix}.')


def under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or inside it (whole path components: 'data/in1k-sub' is not under 'data/in1k')."""
    return Path(path) == Path(root) or Path(root) in Path(path).parents


def moved(path: str, old_root: str, new_root: Path) -> str:
    """``path`` with its leading ``old_root`` replaced by ``new_root``."""
    relative = Path(path).relative_to(Path(old_root))
    return str(new_root / relative) if relative != Path('.') else str(new_root)


def with_data_root(cfg: Config, root: str | Path, label: str) -> list[str]:
    """Move the paths of ``cfg``'s test and validation sets and evaluators from its ``data_root`` to ``root``, in
    place; return one line per moved path (``section.option: old -> new``).

    Raises:
        DataRootError: the config has no ``data_root`` string, or a path of its test set does not start with it.
    """
    old = cfg.get('data_root')
    if not isinstance(old, str) or not old:
        raise DataRootError(f'{label}: the config has no top-level data_root (the folder its datasets\' paths start '
                            f'with), so --data-root cannot move them', 'add data_root to the config and build its '
                            'dataset paths from it, or leave out --data-root and set the paths in the config')
    root, changes = Path(root), []
    for section in SECTIONS:
        options = cfg.get(section[0])
        for key in section[1:]:
            options = options.get(key) if isinstance(options, (dict, ConfigDict)) else None
        if not isinstance(options, (dict, ConfigDict)):
            continue
        for name in PATH_OPTIONS:
            value = options.get(name)
            if not isinstance(value, str):
                continue
            where = '.'.join([*section, name])
            if not under(value, old):
                if section[0] == 'test_dataloader':
                    raise DataRootError(f'{label}: {where} is {value!r}, which does not start with the config\'s '
                                        f'data_root {old!r}, so --data-root cannot move it',
                                        f'build {name} from data_root in the config, or leave out --data-root and '
                                        f'set {name} in the config')
                continue
            options[name] = moved(value, old, root)
            changes.append(f'{where}: {value} -> {options[name]}')
    cfg.data_root = str(root)
    return changes


def check_layout(dataset: dict[str, Any], root: str | Path, label: str) -> None:
    """Refuse a data root that lacks what ``dataset`` (a test-set config moved by :func:`with_data_root`) reads:
    ImageNet's ``<root>/<split>/<class>/<image>`` for ``ImageFolderDataset``, COCO's image folder and annotation
    file for ``CocoDetection``, the path options of any other dataset."""
    kind = dataset.get('type')
    if kind == 'ImageFolderDataset':
        folder = Path(dataset['root']) / dataset.get('split', 'train')
        classes = [entry for entry in folder.iterdir() if entry.is_dir()] if folder.is_dir() else []
        if not classes:
            found = 'is not a folder' if not folder.is_dir() else 'holds no class folders'
            inside = (f' (pass the folder that holds {folder.parent.name}/, not {folder.parent.name}/ itself)'
                      if folder.parent.name == folder.name and not folder.is_dir() else '')
            raise DataRootError(f'{label}: {folder} {found}{inside}', IMAGENET_HINT)
        empty = next((entry for entry in sorted(classes) if not any(entry.iterdir())), None)
        if empty is not None:
            raise DataRootError(f'{label}: class folder {empty} is empty', IMAGENET_HINT)
        return
    missing = [f'{name} {dataset[name]}' for name in PATH_OPTIONS if isinstance(dataset.get(name), str)
               if not Path(dataset[name]).exists()]
    if missing:
        hint = COCO_HINT if kind == 'CocoDetection' else f'put the data of {kind} there'
        raise DataRootError(f'{label}: {root} lacks {" and ".join(missing)}', hint)


def move_data_roots(root: Path, labels: list[str], configs: list[Config]) -> None:
    """``--data-root``: every config's test and validation sets and evaluators read under ``root``
    (:func:`with_data_root`), whose layout is checked (:func:`check_layout`) before any model is built.

    Raises:
        InvalidArgument: naming ``--data-root``, what is missing and how to prepare it.
    """
    for label, cfg in zip(labels, configs):
        try:
            with_data_root(cfg, root, label)
            check_layout(dict(cfg.test_dataloader.dataset), root, label)
        except DataRootError as error:
            raise InvalidArgument('--data-root', root, error.problem, error.fix) from None
