# pt-scenes with rotated objects (`vispe dataset point-scenes --rotated --out datasets/pt-scenes-rotated`): every
# object turned by a yaw uniform in [-pi, pi), its box tight in its own frame, (K, 8) boxes with the yaw. Evaluated
# by rotated 3D IoU (SUN RGB-D's protocol); otherwise the pt-scenes set-up.
_base_ = ['./pt-scenes.py']
data_root = 'datasets/pt-scenes-rotated/'
train_dataloader = dict(dataset=dict(data_root=data_root))
val_dataloader = dict(dataset=dict(data_root=data_root))
test_dataloader = dict(dataset=dict(data_root=data_root))
val_evaluator = dict(rotated=True)
test_evaluator = dict(rotated=True)
