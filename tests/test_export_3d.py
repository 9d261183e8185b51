"""The camera, point and crop encodings trace whole and export, each in the smallest model that hosts it: torch.compile
sees no graph break (torch._dynamo.explain), torch.export gives the eager outputs, and the ONNX file that
vispe.export writes runs in onnxruntime with the eager outputs, on inputs other than those it was exported with (the
cameras, crops and points are inputs of the graph, not constants). The detectors of configs/ trace and export the same
way, and tools/export.py writes a checked ONNX file of a config's detector."""
from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch._dynamo
from mmengine.config import Config
from torch import nn

import vispe
from vispe.export import (PETRNetwork, detector_network, example_inputs, export_onnx, export_program, ring_cameras,
                          run_onnx)
from vispe.models import VDETR, CropDepthViT, NovelViewTransformer, PETRDetector
from vispe.registry import MODELS

from .conftest import REPO_ROOT
from .helpers import load_tool

PC_RANGE = (-20.0, -20.0, -3.0, 20.0, 20.0, 2.0)
POSITION_RANGE = (-20.0, -20.0, -4.0, 20.0, 20.0, 4.0)
NON_IMAGE = {info.name for info in vispe.list_encodings() if set(info.requires) - {'grid', 'pixels'}}
Inputs = tuple[torch.Tensor, ...]


def turned(lidar2cam: torch.Tensor, yaw: float) -> torch.Tensor:
    """The rig turned by ``yaw`` about the scene's z axis (lidar2cam (B, V, 4, 4) times the inverse turn)."""
    turn = torch.eye(4)
    turn[:2, :2] = torch.tensor([[math.cos(yaw), math.sin(yaw)], [-math.sin(yaw), math.cos(yaw)]])
    return lidar2cam @ turn


def petr_host(encoding: dict, encoder: dict | None = None) -> tuple[nn.Module, Inputs, Inputs]:
    """A small PETR detector's network (ResNet-10t to stride 8, 2 decoder layers of width 32, 7 queries) with the
    camera encoding (and an encoder over the views' tokens with its own), and two input sets of 2 samples x 2 cameras
    at 32 px: the second on another rig (turned, other focal length)."""
    torch.manual_seed(0)
    detector = PETRDetector(backbone=dict(type='TimmFeatures', model_name='resnet10t', out_index=-3), num_classes=5,
                            encoding=encoding, num_queries=7, embed_dim=32, code_size=8, pc_range=PC_RANGE,
                            decoder=dict(depth=2, num_heads=4, mlp_dim=64, dropout=0.0), encoder=encoder)
    network = detector_network(detector)
    first = example_inputs(network, 2, image_size=(32, 32), views=2)
    images, intrinsics, lidar2cam = example_inputs(network, 2, image_size=(32, 32), views=2, seed=1)
    zoom = torch.diag(torch.tensor([1.3, 1.3, 1.0]))
    return network, first, (images, zoom @ intrinsics, turned(lidar2cam, 0.4))


class NovelViewNetwork(nn.Module):
    """NovelViewTransformer's colours of the target rays from tensors (its inputs dict, spelled out)."""

    def __init__(self, model: NovelViewTransformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor, intrinsics: torch.Tensor, extrinsics: torch.Tensor,
                target_intrinsics: torch.Tensor, target_extrinsics: torch.Tensor, rays: torch.Tensor) -> torch.Tensor:
        return self.model(dict(images=images, intrinsics=intrinsics, extrinsics=extrinsics, rays=rays,
                               target_intrinsics=target_intrinsics, target_extrinsics=target_extrinsics))


def nvs_inputs(seed: int) -> Inputs:
    """One scene: 2 input views of 24 x 32 px, 1 target view, 10 rays; the cameras of the ring rig."""
    generator = torch.Generator().manual_seed(seed)
    intrinsics, lidar2cam = ring_cameras(1, 3, (24, 32))
    lidar2cam = turned(lidar2cam, 0.3 * seed)
    return (torch.rand(1, 2, 3, 24, 32, generator=generator), intrinsics[:, :2], lidar2cam[:, :2], intrinsics[:, 2:],
            lidar2cam[:, 2:], torch.randint(0, 24, (1, 10, 2), generator=generator))


def nvs_host(encoding: dict) -> tuple[nn.Module, Inputs, Inputs]:
    """The novel-view model of tests/models/nvs (width 32, one encoder and one decoder layer)."""
    torch.manual_seed(0)
    model = NovelViewTransformer(encoding, embed_dim=32, num_heads=2, encoder_depth=1, decoder_depth=1, mlp_dim=32,
                                 cnn_channels=(8, 8, 16, 16))
    return NovelViewNetwork(model).eval(), nvs_inputs(0), nvs_inputs(1)


class CropDepthNetwork(nn.Module):
    """CropDepthViT's depth of crops of 96 x 128 px images from tensors (the full images' size is fixed)."""

    def __init__(self, model: CropDepthViT) -> None:
        super().__init__()
        self.model = model

    def forward(self, image: torch.Tensor, crop_box: torch.Tensor, intrinsics: torch.Tensor) -> torch.Tensor:
        return self.model(dict(image=image, crop_box=crop_box, intrinsics=intrinsics, image_size=(96, 128)))


def crop_inputs(box: tuple[float, float, float, float], focal: float, seed: int) -> Inputs:
    generator = torch.Generator().manual_seed(seed)
    intrinsics = torch.tensor([[focal, 0, 63.5], [0, focal, 47.5], [0, 0, 1]]).repeat(2, 1, 1)
    return torch.rand(2, 3, 16, 16, generator=generator), torch.tensor([box]).repeat(2, 1), intrinsics


def crop_host(encoding: dict) -> tuple[nn.Module, Inputs, Inputs]:
    """The crop-depth ViT of tests/models/crops (16 px crops, patch 4, one block of width 32)."""
    torch.manual_seed(0)
    model = CropDepthViT(dict(type='TimmViT', model_name='vit_tiny_patch16_224', img_size=16, patch_size=4,
                              embed_dim=32, depth=1, num_heads=2, num_classes=0, class_token=False, global_pool='avg',
                              encoding=encoding))
    return (CropDepthNetwork(model).eval(), crop_inputs((0.0, 0.0, 31.0, 31.0), 100.0, 0),
            crop_inputs((60.0, 20.0, 91.0, 51.0), 250.0, 1))


def point_host(encoding: dict) -> tuple[nn.Module, Inputs, Inputs]:
    """A small V-DETR's network (32 PointNet++ tokens, width 32, 3 decoder layers, 8 queries) and two scenes of 128
    points each."""
    torch.manual_seed(0)
    detector = VDETR(num_classes=3, backbone=dict(in_channels=3, channels=(16, 32), num_samples=32, radius=0.6,
                                                  group_size=8),
                     embed_dim=32, encoder=dict(depth=1, num_heads=2, mlp_dim=32), num_queries=8,
                     decoder=dict(depth=3, num_heads=2, mlp_dim=32, encoding=encoding))
    network = detector_network(detector)
    return network, example_inputs(network, 1, points=128), example_inputs(network, 1, points=128, seed=1)


# Every encoding that is not image-only, in its host (ids: encoding and variant).
CASES: dict[str, Callable[[], tuple[nn.Module, Inputs, Inputs]]] = {
    'PETR-LID': lambda: petr_host(dict(type='PETR', depth_num=4, position_range=POSITION_RANGE)),
    'PETR-UD': lambda: petr_host(dict(type='PETR', depth_num=4, position_range=POSITION_RANGE, depth_mode='UD')),
    'PPE3D': lambda: petr_host(dict(type='PPE3D', mid_channels=32, with_dcn=False, position_range=POSITION_RANGE)),
    'PPE3D-DCN': lambda: petr_host(dict(type='PPE3D', mid_channels=32, with_dcn=True, position_range=POSITION_RANGE)),
    'MultiViewSine': lambda: petr_host(dict(type='MultiViewSine')),
    'GTA-encoder': lambda: petr_host(dict(type='MultiViewSine'), dict(depth=2, num_heads=4, mlp_dim=64, dropout=0.0,
                                                                      encoding=dict(type='GTA'))),
    'GTA-nvs': lambda: nvs_host(dict(type='GTA')),
    'GTA-qk-nvs': lambda: nvs_host(dict(type='GTA', on='qk')),
    'CameraRays': lambda: nvs_host(dict(type='CameraRays', depth_num=4)),
    'KPE-dense': lambda: crop_host(dict(type='KPE')),
    'KPE-center-corner': lambda: crop_host(dict(type='KPE', mode='center-corner')),
    'KPE-no-intrinsics': lambda: crop_host(dict(type='KPE', mode='center-corner', use_intrinsics=False)),
    'VertexRPE': lambda: point_host(dict(type='VertexRPE')),
    'VertexRPE-box-frame': lambda: point_host(dict(type='VertexRPE', box_frame=True)),
    'VertexRPE-direct': lambda: point_host(dict(type='VertexRPE', table_lookup=False)),
    'FourierXYZ': lambda: point_host(dict(type='FourierXYZ')),
    'SinCosXYZ': lambda: point_host(dict(type='SinCosXYZ')),
    'TriPlane': lambda: point_host(dict(type='TriPlane', channels=4, resolution=8, centered=True)),
    'TriPlane-knn': lambda: point_host(dict(type='TriPlane', channels=4, resolution=8, knn=4, centered=True)),
}


def assert_close(actual: tuple[torch.Tensor, ...] | list, expected: tuple[torch.Tensor, ...], tolerance: float) -> None:
    """Each output within ``tolerance`` (absolute, and relative to the eager value: box codes are in metres)."""
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        torch.testing.assert_close(torch.as_tensor(got), want, atol=tolerance, rtol=tolerance)


def eager(module: nn.Module, inputs: Inputs) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        outputs = module(*inputs)
    return outputs if isinstance(outputs, tuple) else (outputs,)


def graph_breaks(module: nn.Module, inputs: Inputs) -> list[str]:
    torch._dynamo.reset()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter('ignore')
        explained = torch._dynamo.explain(module)(*inputs)
    return [str(reason.reason).splitlines()[0] for reason in explained.break_reasons]


def test_every_non_image_encoding_has_a_case() -> None:
    assert NON_IMAGE == {case.split('-')[0] for case in CASES}


@pytest.mark.parametrize('case', CASES)
def test_compile_sees_one_graph(case: str) -> None:
    module, inputs, _ = CASES[case]()
    assert graph_breaks(module, inputs) == []


@pytest.mark.parametrize('case', CASES)
def test_export_gives_the_eager_outputs_on_other_inputs(case: str) -> None:
    module, inputs, others = CASES[case]()
    program = export_program(module, inputs).module()
    assert_close(eager(program, others), eager(module, others), 1e-5)


# The PETR detector's and the crop ViT's ONNX files take a few seconds to write; the others 10-20 s (slow). The suite
# writes one per encoding family (every case was checked once: docs/export.md); compile and torch.export cover all.
ONNX_FAST_CASES = ('PETR-LID', 'KPE-dense', 'KPE-center-corner', 'KPE-no-intrinsics')
ONNX_SLOW_CASES = ('PPE3D-DCN', 'GTA-nvs', 'VertexRPE', 'TriPlane-knn')


@pytest.mark.parametrize('case', [*ONNX_FAST_CASES, *(pytest.param(case, marks=pytest.mark.slow)
                                                      for case in ONNX_SLOW_CASES)])
def test_onnx_runs_in_onnxruntime_with_the_eager_outputs(case: str, tmp_path: Path) -> None:
    module, inputs, others = CASES[case]()
    path = export_onnx(module, inputs, tmp_path / f'{case}.onnx')
    assert_close(run_onnx(path, others), eager(module, others), 1e-4)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f'{case}.onnx']


def test_petr_onnx_names_its_inputs_and_outputs_and_takes_masks(tmp_path: Path) -> None:
    import onnx
    module, (images, intrinsics, lidar2cam), _ = CASES['PETR-LID']()
    masks = torch.ones(2, 2, 32, 32, dtype=torch.bool)
    masks[1, 1] = False                                     # sample 1's second camera is missing
    masks[0, :, 24:] = False                                # sample 0's views are padded at the bottom
    path = export_onnx(module, (images, intrinsics, lidar2cam, masks), tmp_path / 'petr.onnx')
    graph = onnx.load(str(path)).graph
    assert [item.name for item in graph.input] == ['images', 'intrinsics', 'lidar2cam', 'masks']
    assert [item.name for item in graph.output] == ['logits', 'code']
    noisy = images.clone()
    noisy[1, 1] = torch.randn(3, 32, 32) * 5                # what a missing camera sees does not matter
    assert_close(run_onnx(path, (noisy, intrinsics, lidar2cam, masks)),
                 eager(module, (images, intrinsics, lidar2cam, masks)), 1e-4)


def test_ppe3d_with_lidar_depth_cannot_export_its_network() -> None:
    """3DPPE's 'gt' and 'hybrid' depth sources read LiDAR depth maps, which the exported network does not take."""
    module, inputs, _ = petr_host(dict(type='PPE3D', mid_channels=32, with_dcn=False, depth_source='gt',
                                       position_range=POSITION_RANGE))
    with pytest.raises(ValueError, match="depth_source='gt' reads LiDAR depth from the positions; the batch has none"):
        export_program(module, inputs)


def test_only_detectors_have_an_exportable_network() -> None:
    module, _, _ = CASES['CameraRays']()
    with pytest.raises(TypeError, match=r'NovelViewTransformer has no exportable network forward; vispe exports the '
                                        r'detectors PETRDetector, VDETR, DETR \(for another model, pass a module'):
        detector_network(module.model)


def configs(folder: str) -> list[str]:
    return sorted(path.name for path in (REPO_ROOT / 'configs' / folder).glob('*.py'))


def config_network(folder: str, name: str) -> tuple[nn.Module, Inputs]:
    """The config's detector (no pretrained download, seed 0) and one input of a small size: 2 cameras of the test
    set's size (nuScenes: 128 x 352) for PETR, 64 x 80 (COCO: 128 x 160) for DETR, 1024 points for V-DETR."""
    cfg = Config.fromfile(str(REPO_ROOT / 'configs' / folder / name))
    if 'pretrained' in cfg.model.backbone:
        cfg.model.backbone.pretrained = False
    torch.manual_seed(0)
    network = detector_network(MODELS.build(cfg.model))
    if folder == 'vdetr':
        return network, example_inputs(network, points=max(1024, network.detector.backbone.num_samples))
    if folder == 'petr':
        size = (128, 352) if 'nuscenes' in name else tuple(cfg.test_dataloader.dataset.image_size)
        return network, example_inputs(network, image_size=size, views=2)
    return network, example_inputs(network, image_size=(64, 80) if 'fmnist' in name else (128, 160))


def heavy(folder: str, name: str) -> bool:
    """ResNet-50 detectors and V-DETR (its farthest-point sampling unrolls to one graph step per sampled point)."""
    return folder == 'vdetr' or 'r50' in name


def config_params(folders: tuple[str, ...], chosen: Callable[[str, str], bool]) -> list:
    """The chosen configs of the folders. The suite keeps to the light ones (ResNet-18 PETR, DETR; every config was
    traced, exported and run in onnxruntime once, 934 s: docs/export.md)."""
    return [pytest.param(folder, name, id=name) for folder in folders for name in configs(folder)
            if chosen(folder, name)]


# The ONNX files of the other configs hold the same encodings as the small hosts above (10-60 s each).
ONNX_FAST = 'petr-r18_petr-lid_mv-scenes.py'


@pytest.mark.parametrize('folder, name', config_params(('petr', 'detr', 'vdetr'),
                                                       lambda folder, name: not heavy(folder, name)))
def test_config_detector_traces_whole_and_exports(folder: str, name: str) -> None:
    network, inputs = config_network(folder, name)
    assert graph_breaks(network, inputs) == []
    assert_close(eager(export_program(network, inputs).module(), inputs), eager(network, inputs), 1e-5)


@pytest.mark.parametrize('folder, name', config_params(('petr',), lambda folder, name: name == ONNX_FAST))
def test_config_detector_onnx_runs_in_onnxruntime(folder: str, name: str, tmp_path: Path) -> None:
    network, inputs = config_network(folder, name)
    path = export_onnx(network, inputs, tmp_path / 'detector.onnx')
    assert_close(run_onnx(path, inputs), eager(network, inputs), 1e-4)


def test_export_tool_writes_a_checked_onnx_file_of_a_config(tmp_path: Path, capsys) -> None:
    export = load_tool('export')
    out = tmp_path / 'onnx' / 'petr.onnx'
    status = export.main([str(REPO_ROOT / 'configs/petr/petr-r18_nope_mv-scenes.py'), '--out', str(out),
                          '--image-size', '90', '160', '--views', '2'])
    printed = capsys.readouterr().out
    assert status == 0 and out.is_file() and sorted(p.name for p in out.parent.iterdir()) == ['petr.onnx']
    assert 'inputs images (1, 2, 3, 90, 160), intrinsics (1, 2, 3, 3), lidar2cam (1, 2, 4, 4)' in printed
    assert 'outputs logits (1, 30, 5), code (1, 30, 8)' in printed
    assert printed.count('onnxruntime vs eager') == 2 and '>' not in printed.split('onnxruntime vs eager')[-1]
    network = detector_network(MODELS.build(Config.fromfile(str(REPO_ROOT / 'configs/petr/'
                                                                'petr-r18_nope_mv-scenes.py')).model))
    assert isinstance(network, PETRNetwork)


def test_export_tool_loads_the_checkpoint_it_exports(tmp_path: Path, capsys) -> None:
    export = load_tool('export')
    config = REPO_ROOT / 'configs/detr/detr-r18_nope_fmnist-det.py'
    torch.manual_seed(3)
    trained = detector_network(MODELS.build(Config.fromfile(str(config)).model))
    torch.save({'state_dict': trained.detector.state_dict()}, tmp_path / 'best.pth')
    out = tmp_path / 'detr.onnx'
    assert export.main([str(config), '--out', str(out), '--checkpoint', str(tmp_path / 'best.pth')]) == 0
    assert 'inputs images (1, 3, 64, 64)' in capsys.readouterr().out
    inputs = example_inputs(trained, image_size=(64, 64), seed=5)
    assert_close(run_onnx(out, inputs), eager(trained, inputs), 1e-4)


@pytest.mark.parametrize('argv, message', [
    (['configs/vit/vit-t4_ape_fmnist-28.py', '--out', 'x.onnx'],
     'ImageClassifier has no exportable network forward; vispe exports the detectors'),
    (['configs/petr/petr-r18_nope_mv-scenes.py', '--out', 'x.pt'], "--out x.pt: is not an .onnx file"),
    (['configs/vdetr/vdetr-s_nope_pt-scenes.py', '--out', 'x.onnx', '--points', '100'],
     '--points 100: the backbone samples 512 points of each scene; give at least that many'),
])
def test_export_tool_refuses_what_it_cannot_export(argv: list[str], message: str, tmp_path: Path, capsys,
                                                   monkeypatch) -> None:
    export = load_tool('export')
    monkeypatch.chdir(REPO_ROOT)
    argv = [str(tmp_path / arg) if arg.startswith('x.') else arg for arg in argv]
    with pytest.raises((SystemExit, export.InvalidArgument)) as raised:
        export.main(argv)
    text = str(raised.value) if isinstance(raised.value, export.InvalidArgument) else capsys.readouterr().err
    assert message.replace('x.', str(tmp_path / 'x.')) in text


def test_docs_snippet_exports_a_petr_detector_and_decodes_its_onnx_outputs(tmp_path: Path, monkeypatch,
                                                                         capsys) -> None:
    block = re.findall(r'```python\n(.*?)```', (REPO_ROOT / 'docs' / 'export.md').read_text(), flags=re.S)[0]
    (tmp_path / 'configs').symlink_to(REPO_ROOT / 'configs')
    monkeypatch.chdir(tmp_path)
    exec(compile(block, 'docs/export.md', 'exec'), {})
    assert (tmp_path / 'petr.onnx').is_file()
    assert 'torch.Size([150, 7])' in capsys.readouterr().out          # 30 queries x 5 classes, every box kept
