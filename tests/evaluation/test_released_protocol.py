"""``vispe eval-resolution`` on released (converted) checkpoints, run in-process on real photos: a converted ViT
backbone file and timm's own ViT file on an ImageNet-layout folder, DETR on a COCO-layout folder, ``--data-root``
and its layout errors, and LookHere's evaluation pipeline against its authors' code (golden tensors)."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import timm
import torch
from PIL import Image

import vispe
from vispe.checkpoint import CheckpointMismatchError, model_encodings
from vispe.datasets.image_folder import ImageFolderDataset, LookHereEval
from vispe.engine.arguments import InvalidArgument
from vispe.engine.hooks import save_atomically
from vispe.registry import MODELS

from ..conftest import REPO_ROOT
from ..helpers import load_tool

skdata = pytest.importorskip('skimage.data')
GOLDEN = REPO_ROOT / 'tests' / 'data' / 'protocols' / 'lookhere'
PHOTOS = {'cat': ('chelsea', 'cat'), 'cup': ('coffee', 'rocket'), 'person': ('astronaut', 'camera')}
BACKBONE = dict(type='TimmViT', model_name='vit_tiny_patch16_224', img_size=32, num_classes=3, embed_dim=32, depth=2,
                num_heads=2)
ENCODINGS = {'LearnedAPE': dict(type='LearnedAPE'), 'RoPEMixed': dict(type='RoPEMixed'),
             'LookHere': dict(type='LookHere', directions='halves')}


def photo(name: str) -> Image.Image:
    """A scikit-image photo as RGB (``camera`` is greyscale)."""
    return Image.fromarray(np.asarray(getattr(skdata, name)())).convert('RGB')


def imagenet_folder(root: Path) -> Path:
    """``root/val/<class>/<image>``: 3 classes x 2 real photos, as JPEG and PNG."""
    for label, names in PHOTOS.items():
        (root / 'val' / label).mkdir(parents=True)
        for index, name in enumerate(names):
            photo(name).save(root / 'val' / label / f'{name}.{"jpg" if index else "png"}')
    return root


def classifier_config(root: Path, encoding: str, **options: Any) -> Path:
    """An eval-only config as the released ones are: ImageNet's dataset base, a small ImageClassifier(TimmViT)
    (``options`` override the backbone's)."""
    path = root / f'vit-tiny_{encoding.lower()}_in1k.py'
    backbone = dict(BACKBONE, encoding=ENCODINGS[encoding], **options)
    path.write_text(f"_base_ = ['{REPO_ROOT}/configs/_base_/datasets/imagenet-224.py', "
                    f"'{REPO_ROOT}/configs/_base_/default_runtime.py']\n"
                    f"model = dict(type='ImageClassifier', backbone={backbone!r})\n")
    return path


def converted_file(path: Path, encoding: str, seed: int = 0) -> Path:
    """A backbone file in the layout ``vispe convert`` writes (vispe/converters/files.py): the TimmViT's own keys
    (no ``backbone.`` prefix) and ``meta`` with the model config and its encodings."""
    torch.manual_seed(seed)
    model = dict(BACKBONE, encoding=ENCODINGS[encoding])
    backbone = MODELS.build(model)
    meta = dict(converted_from='released.pth', kind='test-family', converter_version=1, unmapped=[], derived=[],
                encodings=model_encodings(backbone), model=model)
    save_atomically(dict(state_dict=backbone.state_dict(), meta=meta), path)
    return path


def eval_resolution(*args: str) -> int:
    """``vispe eval-resolution --quiet ARGS`` in this process (images decoded here unless ARGS give --workers)."""
    workers = [] if '--workers' in args else ['--workers', '0']
    return load_tool('eval_resolution').main(['--quiet', *workers, *args])


@pytest.mark.parametrize('encoding', ['LearnedAPE', 'LookHere'])
def test_a_converted_backbone_evaluates_on_an_imagenet_folder_at_each_size(tmp_path, encoding) -> None:
    data = imagenet_folder(tmp_path / 'imagenet')
    config = classifier_config(tmp_path, encoding, drop_path_rate=0.1)  # a training-only option may differ
    checkpoint = converted_file(tmp_path / 'converted.pth', encoding)
    out = tmp_path / 'results' / 'table'
    assert eval_resolution(f'{config}::{checkpoint}', '--sizes', '32', '48', '--data-root', str(data),
                           '--batch-size', '4', '--device', 'cpu', '--out', str(out)) == 0
    with open(out.with_suffix('.csv')) as handle:
        rows = list(csv.DictReader(handle))
    assert [row['size'] for row in rows] == ['32', '48']
    assert all(0 <= float(row['top1']) <= 100 and float(row['top1']) <= float(row['top5']) for row in rows)
    report = json.loads(out.with_suffix('.json').read_text())
    dataset = report['runs'][0]['dataset']
    assert dataset['root'] == str(data) and dataset['eval_protocol'] == 'lookhere' and dataset['split'] == 'val'
    assert sorted(report['runs'][0]['results']) == ['32', '48'] and '--data-root' in report['command']


def test_the_loaded_weights_are_the_converted_ones(tmp_path) -> None:
    checkpoint = converted_file(tmp_path / 'converted.pth', 'RoPEMixed', seed=3)
    classifier = MODELS.build(dict(type='ImageClassifier', backbone=dict(BACKBONE, encoding=ENCODINGS['RoPEMixed'])))
    vispe.load_checkpoint(classifier, checkpoint)
    saved = torch.load(checkpoint, weights_only=True)['state_dict']
    assert all(torch.equal(classifier.backbone.state_dict()[key], value) for key, value in saved.items())


def test_a_converted_file_of_another_encoding_or_a_mixed_file_is_refused(tmp_path) -> None:
    data = imagenet_folder(tmp_path / 'imagenet')
    config = classifier_config(tmp_path, 'LookHere')
    other = converted_file(tmp_path / 'rope.pth', 'RoPEMixed')
    with pytest.raises(CheckpointMismatchError, match=r'trained with encoding RoPEMixed, but the model has LookHere'):
        eval_resolution(f'{config}::{other}', '--sizes', '32', '--data-root', str(data), '--out', str(tmp_path / 'o'))
    heads = classifier_config(tmp_path, 'LookHere', num_heads=4)  # the same tensor shapes, other outputs
    with pytest.raises(CheckpointMismatchError, match=r'converted for another model than the config builds: '
                                                      r'num_heads: file 2 != config 4'):
        eval_resolution(f'{heads}::{converted_file(tmp_path / "lh.pth", "LookHere")}', '--sizes', '32', '--data-root',
                        str(data), '--out', str(tmp_path / 'o'))
    file = torch.load(tmp_path / 'lh.pth', weights_only=True)
    file['state_dict']['decoder.weight'] = torch.zeros(2)
    torch.save(file, tmp_path / 'mixed.pth')
    classifier = MODELS.build(dict(type='ImageClassifier', backbone=dict(BACKBONE, encoding=ENCODINGS['LookHere'])))
    before = {key: value.clone() for key, value in classifier.state_dict().items()}
    with pytest.raises(CheckpointMismatchError, match=r'without the model\'s "backbone\." prefix .*decoder\.weight '
                                                      r'fit neither the backbone nor the whole ImageClassifier'):
        vispe.load_checkpoint(classifier, tmp_path / 'mixed.pth')
    assert all(torch.equal(value, before[key]) for key, value in classifier.state_dict().items())


def test_timms_own_vit_file_loads_into_a_learned_ape_classifier(tmp_path) -> None:
    torch.manual_seed(0)
    reference = timm.create_model('vit_tiny_patch16_224', img_size=32, num_classes=3, embed_dim=32, depth=2,
                                  num_heads=2).eval()
    torch.save(reference.state_dict(), tmp_path / 'timm.pth')
    classifier = MODELS.build(dict(type='ImageClassifier', backbone=dict(BACKBONE, encoding=ENCODINGS['LearnedAPE'])))
    vispe.load_checkpoint(classifier.eval(), tmp_path / 'timm.pth')
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(classifier(images), reference(images), atol=1e-6)


def test_data_root_layout_errors_say_how_to_prepare_the_data(tmp_path) -> None:
    config = classifier_config(tmp_path, 'LearnedAPE')
    checkpoint = converted_file(tmp_path / 'converted.pth', 'LearnedAPE')
    flat = tmp_path / 'flat'
    (flat / 'val').mkdir(parents=True)
    photo('chelsea').save(flat / 'val' / 'ILSVRC2012_val_00000001.JPEG')
    run = (f'{config}::{checkpoint}', '--sizes', '32', '--out', str(tmp_path / 'o'), '--data-root')
    with pytest.raises(InvalidArgument, match=r'flat/val holds no class folders; ImageNet val must be in ImageFolder '
                                              r'layout.*torchvision\.datasets\.ImageNet'):
        eval_resolution(*run, str(flat))
    with pytest.raises(InvalidArgument, match=r'val/val is not a folder \(pass the folder that holds val/, not val/ '
                                              r'itself\)'):
        eval_resolution(*run, str(flat / 'val'))


def write_coco(root: Path) -> Path:
    """``root/val2017/*.jpg`` (3 real photos) and ``root/annotations/instances_val2017.json`` with a few boxes of
    COCO's categories (ids 1 person, 17 cat, 47 cup)."""
    (root / 'val2017').mkdir(parents=True)
    (root / 'annotations').mkdir()
    boxes = {'astronaut': [(1, [150, 20, 230, 480]), (47, [0, 330, 80, 180])], 'chelsea': [(17, [130, 20, 300, 280])],
             'coffee': [(47, [60, 20, 420, 330])]}
    images, annotations = [], []
    for image_id, (name, items) in enumerate(boxes.items(), start=1):
        image = photo(name)
        image.save(root / 'val2017' / f'{image_id:012d}.jpg')
        images.append(dict(id=image_id, file_name=f'{image_id:012d}.jpg', width=image.width, height=image.height))
        for category, box in items:
            annotations.append(dict(id=len(annotations) + 1, image_id=image_id, category_id=category, bbox=box,
                                    area=box[2] * box[3], iscrowd=0))
    categories = [dict(id=1, name='person'), dict(id=17, name='cat'), dict(id=47, name='cup')]
    path = root / 'annotations' / 'instances_val2017.json'
    path.write_text(json.dumps(dict(images=images, annotations=annotations, categories=categories)))
    return root


def detr_config(root: Path) -> Path:
    """DETR's COCO config made small: ResNet-18 from scratch to stride 8, one encoder and decoder layer of width 32."""
    path = root / 'detr-r18_coco-val.py'
    path.write_text(f"_base_ = ['{REPO_ROOT}/configs/_base_/models/detr-r50.py', "
                    f"'{REPO_ROOT}/configs/_base_/datasets/coco-detr.py', "
                    f"'{REPO_ROOT}/configs/_base_/detr_runtime.py']\n"
                    "model = dict(backbone=dict(model_name='resnet18', out_index=-3, pretrained=False, "
                    "frozen_bn=False), num_classes=3, num_queries=5, embed_dim=32, "
                    "encoder=dict(depth=1, num_heads=2, mlp_dim=64), decoder=dict(depth=1, num_heads=2, mlp_dim=64))\n")
    return path


def test_detr_on_a_coco_folder_at_each_shorter_side(tmp_path) -> None:
    data = write_coco(tmp_path / 'coco')
    config = detr_config(tmp_path)
    cfg = vispe.engine.load_config(config)
    torch.manual_seed(0)
    torch.save(MODELS.build(cfg.model).state_dict(), tmp_path / 'detr.pth')
    out = tmp_path / 'detr'
    assert eval_resolution(f'{config}::{tmp_path / "detr.pth"}', '--sizes', '64', '96', '--data-root', str(data),
                           '--batch-size', '2', '--workers', '2', '--out', str(out)) == 0
    report = json.loads(out.with_suffix('.json').read_text())
    run = report['runs'][0]
    assert sorted(run['results']) == ['64', '96']
    assert all(-1 <= result['bbox_mAP'] <= 1 for result in run['results'].values())
    assert run['dataset']['data_root'] == str(data / 'val2017')
    assert run['dataset']['ann_file'] == str(data / 'annotations' / 'instances_val2017.json')
    assert run['dataset']['max_size'] == round(1333 * 96 / 800)  # the longer-side cap scales with the size
    (data / 'annotations' / 'instances_val2017.json').unlink()
    with pytest.raises(InvalidArgument, match=r'lacks ann_file .*instances_val2017\.json; COCO 2017 must be in its own '
                                              r'layout: <root>/val2017/'):
        eval_resolution(f'{config}::{tmp_path / "detr.pth"}', '--sizes', '64', '--data-root', str(data),
                        '--out', str(out))


@pytest.mark.parametrize('name', ['astronaut_77x103', 'coffee_66x49'])
@pytest.mark.parametrize('size', [224, 320, 512])
def test_lookhere_eval_pipeline_equals_the_authors(name, size) -> None:
    """GreenCUBIC/lookhere @ 641deab data_prep.py ImageNetDataset(do_augment=False) ran on these photos
    (tests/data/protocols/lookhere/README.md): every 8th pixel, the border rows and columns (where the truncated
    resize leaves a zero-padded line) agree exactly, and the sum to 1e-12 (float64 sums in another order)."""
    golden = torch.load(GOLDEN / 'golden.pt', weights_only=True)
    ours = LookHereEval(size)(Image.open(GOLDEN / f'{name}.png').convert('RGB'))
    assert ours.shape == (3, size, size)
    assert torch.equal(ours[:, ::8, ::8], golden[f'{name}@{size}'])
    border = torch.cat([ours[:, 0, :], ours[:, -1, :], ours[:, :, 0], ours[:, :, -1]], 1)
    assert torch.equal(border, golden[f'{name}@{size}:border'])
    assert math.isclose(ours.double().sum().item(), golden[f'{name}@{size}:sum'].item(), rel_tol=1e-12)


def test_lookhere_protocol_options_and_the_base_config(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"eval_protocol='lookhere' fixes its own crop .*got crop_pct=0\.875"):
        ImageFolderDataset(tmp_path, eval_protocol='lookhere', crop_pct=0.875)
    with pytest.raises(ValueError, match=r"eval_protocol must be one of \('timm', 'lookhere'\); got 'lookhear'"):
        ImageFolderDataset(tmp_path, eval_protocol='lookhear')
    data = imagenet_folder(tmp_path / 'imagenet')
    dataset = ImageFolderDataset(data, split='val', image_size=224, eval_protocol='lookhere')
    assert isinstance(dataset.transform, LookHereEval) and dataset.transform.resize_to == 256
    assert ImageFolderDataset(data, split='val', image_size=320, eval_protocol='lookhere').transform.resize_to == 320
    cfg = vispe.engine.load_config(REPO_ROOT / 'configs' / '_base_' / 'datasets' / 'imagenet-224.py')
    assert cfg.test_dataloader.dataset.eval_protocol == 'lookhere'


@pytest.mark.skipif(torch.cuda.is_available(), reason='the refusal is for machines without a GPU')
def test_a_cuda_device_without_a_gpu_is_refused(tmp_path, capsys) -> None:
    config = classifier_config(tmp_path, 'LearnedAPE')
    with pytest.raises(SystemExit) as exit_status:
        eval_resolution(f'{config}::x.pth', '--sizes', '32', '--device', 'cuda', '--out', str(tmp_path / 'o'))
    assert exit_status.value.code == 2
    assert '--device cuda: torch sees no CUDA GPU here; pass --device cpu' in capsys.readouterr().err


def test_data_root_moves_whole_path_components_only() -> None:
    """A path that only shares the data root's text ('data/in1k-sub' beside 'data/in1k') is not under it."""
    from vispe.evaluation.data_root import moved, under
    assert under('data/in1k/val', 'data/in1k') and under('data/in1k', 'data/in1k/')
    assert not under('data/in1k-sub/val', 'data/in1k')
    assert moved('data/in1k/val', 'data/in1k/', Path('/imagenet')) == '/imagenet/val'
