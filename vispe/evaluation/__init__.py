"""Metrics as mmengine metrics, registered in :data:`vispe.registry.METRICS`, and the protocols by which
``vispe eval-resolution`` measures released checkpoints at several input sizes.

LookHere's protocol (ImageNet-1k val at 224 ... 1024 px)
---------------------------------------------------------
The LookHere paper (Fuller et al., NeurIPS 2024) trains ViT-B/16s at 224 px and measures top-1 on ImageNet-1k's
50 000 validation images at larger sizes S without finetuning. Its evaluation pipeline is ``data_prep.py`` of
GreenCUBIC/lookhere @ 641deab (``ImageNetDataset`` with ``do_augment=False``, lines 136-150; ``ResizeSmall``, lines
83-107; ``mean, std``, line 19), and vispe's :class:`~vispe.datasets.image_folder.LookHereEval`
(``ImageFolderDataset(eval_protocol='lookhere')``, the validation set of ``configs/_base_/datasets/imagenet-224.py``)
reproduces it exactly (tests/evaluation/test_released_protocol.py compares it with tensors the authors' code gave):

1. the image is decoded, converted to RGB and made a float tensor in [0, 1] (torchvision's ``ToTensor``) before any
   resizing;
2. its shorter side is resized to R = 256 when S = 224 (DeiT's crop ratio 0.875) and to R = S at every other size
   (crop ratio 1); the other side to ``int(side * (R / shorter))``: truncated, so for some shorter sides (49, 77,
   303, ...) the shorter side itself comes out at R - 1. Bilinear, antialiased (``transforms.Resize(..., antialias=
   True)`` on the float tensor: no rounding to uint8);
3. the centre S x S is cropped (torchvision's ``CenterCrop``: a side left at S - 1 by step 2 is padded with a zero
   line first), so the image is never stretched: the longer side is cropped;
4. it is normalised with ImageNet's mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225).

The model sees the S/16 x S/16 grid: LookHere's bias maps are recomputed for it (the authors'
``LookHere.set_pos_embed(S // 16)``, README.md lines 59-64; vispe's ``LookHere`` builds them per grid). The authors'
repository has no code that resamples a learned position table to another grid (their ``vision_transformer.py``
holds a fixed-size ``pos_embed``, which LookHere deletes); vispe's ``LearnedAPE`` resamples with timm's
``resample_abs_pos_embed`` (bicubic, antialiased, ``align_corners=False``), the rule timm and DeiT use. The authors
predict under ``torch.cuda.amp.autocast(dtype=torch.bfloat16)`` (README.md lines 49-56); ``eval-resolution`` runs in
float32. The sizes: ``--sizes 224 320 384 448 512 640 768 1024`` (multiples of the patch, 16).

DETR on COCO val2017
--------------------
:class:`~vispe.datasets.coco_detection.CocoDetection` resizes by DETR's rule (the shorter side to S unless the
longer side would pass ``max_size``; DETR evaluates at S = 800 with ``max_size`` 1333); at other sizes
``eval-resolution`` scales the cap with S (``max(S, round(1333 * S / 800))``), so every size keeps DETR's aspect
limit. Boxes are predicted on the resized image and scaled back to the original size for COCO's box mAP.
"""
from vispe.evaluation.accuracy import Accuracy
from vispe.evaluation.coco_metric import CocoMetric
from vispe.evaluation.crop_depth_metric import CropDepthMetric
from vispe.evaluation.indoor_ap import IndoorAP
from vispe.evaluation.nuscenes_metric import NuScenesMetric
from vispe.evaluation.nvs_metric import NVSMetric
from vispe.evaluation.three_cell_metric import ThreeCellMetric

__all__ = ['Accuracy', 'CocoMetric', 'CropDepthMetric', 'IndoorAP', 'NuScenesMetric', 'NVSMetric', 'ThreeCellMetric']
