# DETR-R50 as facebookresearch/detr released it (detr-r50-e632da11.pth), for evaluation on COCO val2017: the
# architecture of configs/_base_/models/detr-r50.py (the converter infers the same from the file's tensors) with 91
# classes, whose 92 logits are indexed by COCO category id, scored with CocoMetric(labels='category_id').
#   vispe convert detr detr-r50-e632da11.pth detr-r50_converted.pth
#   vispe eval-resolution configs/released/detr-r50_coco-val.py::detr-r50_converted.pth \
#       --sizes 512 640 800 960 1024 --data-root datasets/coco
# The test set is DETR's: shorter side 800 (each --sizes value), longer side at most 1333 (scaled with the size).
_base_ = ['../_base_/models/detr-r50.py', '../_base_/datasets/coco-detr.py']
model = dict(backbone=dict(pretrained=False), num_classes=91)
val_evaluator = dict(labels='category_id')
test_evaluator = dict(labels='category_id')
