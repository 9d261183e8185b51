# V-DETR-S on rotated pt-scenes: boxes with 3DETR's 12 heading bins, VertexRPE with box_frame=True: the offsets turned
# into each box's frame (V-DETR's object-coordinate form).
_base_ = ['../_base_/models/vdetr-s_pt-scenes.py', '../_base_/datasets/pt-scenes-rotated.py',
          '../_base_/schedules/vdetr-pt-scenes.py', '../_base_/vdetr_runtime.py']
model = dict(num_yaw_bins=12, decoder=dict(encoding=dict(type='VertexRPE', box_frame=True)))
