# Depth from crops with the crop box in pixels alone: KPE's centre-and-corner features under a nominal camera of the
# image size (fx = fy = W, principal point at the centre) instead of the real K. It knows where the crop lies in the
# image but not the focal length: the baseline KPE must beat where K changes.
_base_ = ['../_base_/models/vit-t4_crop-depth.py', '../_base_/datasets/mv-crops-depth.py',
          '../_base_/schedules/crops-mv-depth.py', '../_base_/crops_runtime.py']
model = dict(backbone=dict(encoding=dict(type='KPE', mode='center-corner', use_intrinsics=False)))
