# Evaluation only: the released LookHere LH-45 ViT-B/16 (GreenCUBIC/lookhere, LH_45_weights_and_config.pth) as
# `vispe convert lookhere` infers it. The converter reads the LookHere options from the file's config and prints them
# on its note line. The directions here, with the base's global slope 1 and layer slopes (1.5, 0.5), are the paper's
# LH-45 setting as vispe reads it, not checked against the file: edit them if the note line differs.
# See models/released/lookhere/README.md.
_base_ = ['../_base_/models/lookhere_vit-b16_released.py', '../_base_/datasets/imagenet-224.py',
          '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=dict(directions='triangles-eighths1-eighths2')))
