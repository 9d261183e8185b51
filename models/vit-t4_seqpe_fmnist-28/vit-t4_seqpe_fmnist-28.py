custom_hooks = [
    dict(metric='accuracy/top1', type='WeightsCheckpointHook'),
]
default_hooks = dict(
    checkpoint=dict(
        interval=1,
        max_keep_ckpts=2,
        rule='greater',
        save_best='accuracy/top1',
        type='CheckpointHook'),
    logger=dict(interval=20, type='LoggerHook'),
    param_scheduler=dict(type='ParamSchedulerHook'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    timer=dict(type='IterTimerHook'))
default_scope = 'vispe'
env_cfg = dict(
    cudnn_benchmark=False,
    dist_cfg=dict(backend='gloo'),
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0))
launcher = 'none'
load_from = None
log_level = 'INFO'
log_processor = dict(by_epoch=True, window_size=20)
max_epochs = 8
model = dict(
    backbone=dict(
        depth=4,
        drop_path_rate=0.0,
        embed_dim=64,
        encoding=dict(type='SeqPE'),
        img_size=28,
        in_chans=1,
        mlp_ratio=2.0,
        model_name='vit_tiny_patch16_224',
        num_classes=10,
        num_heads=4,
        patch_size=4,
        type='TimmViT'),
    encoding_losses=dict(contrastive=0.1, distillation=0.1),
    label_smoothing=0.0,
    type='ImageClassifier')
model_wrapper_cfg = dict(
    broadcast_buffers=False, type='vispe.AnyDeviceDistributedDataParallel')
optim_wrapper = dict(
    clip_grad=dict(max_norm=1.0),
    constructor='NoDecayOptimWrapperConstructor',
    optimizer=dict(
        betas=(
            0.9,
            0.999,
        ), lr=0.002, type='AdamW', weight_decay=0.05))
param_scheduler = [
    dict(
        begin=0,
        by_epoch=True,
        convert_to_iter_based=True,
        end=1,
        start_factor=0.01,
        type='LinearLR'),
    dict(
        begin=1,
        by_epoch=True,
        convert_to_iter_based=True,
        end=8,
        eta_min=1e-05,
        type='CosineAnnealingLR'),
]
randomness = dict(deterministic=False, seed=0)
resume = False
runner_type = 'vispe.VispeRunner'
test_cfg = dict()
test_dataloader = dict(
    batch_size=256,
    collate_fn=dict(type='default_collate'),
    dataset=dict(
        image_size=28,
        split='test',
        subset=None,
        subset_seed=0,
        type='FashionMNIST'),
    num_workers=0,
    sampler=dict(shuffle=False, type='DefaultSampler'))
test_evaluator = dict(
    topk=(
        1,
        5,
    ), type='Accuracy')
train_cfg = dict(by_epoch=True, max_epochs=8, val_interval=1)
train_dataloader = dict(
    batch_size=128,
    collate_fn=dict(type='default_collate'),
    dataset=dict(
        crop_scale=(
            0.8,
            1.0,
        ),
        image_size=28,
        split='train-minus-minival',
        subset=None,
        subset_seed=0,
        train_augment=True,
        type='FashionMNIST'),
    num_workers=0,
    sampler=dict(shuffle=True, type='DefaultSampler'))
val_cfg = dict()
val_dataloader = dict(
    batch_size=256,
    collate_fn=dict(type='default_collate'),
    dataset=dict(
        image_size=28,
        split='minival',
        subset=None,
        subset_seed=0,
        type='FashionMNIST'),
    num_workers=0,
    sampler=dict(shuffle=False, type='DefaultSampler'))
val_evaluator = dict(
    topk=(
        1,
        5,
    ), type='Accuracy')
work_dir = 'work_dirs/zoo/vit-t4_seqpe_fmnist-28_s0'
