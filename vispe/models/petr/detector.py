"""A PETR-style multi-view 3D detector for mmengine's Runner (Liu et al., ECCV 2022; 3DPPE, Shu et al., ICCV 2023).

Images of V cameras go through one timm backbone (``features_only``, shared by the views) and a 1×1 input
projection; a camera encoding (:class:`~vispe.encodings.PETR`, :class:`~vispe.encodings.PPE3D`,
:class:`~vispe.encodings.MultiViewSine`) gives the memory its key embedding and the learnable 3D reference
points their query embedding; a decoder of self- and cross-attention layers runs the queries over the tokens of
all cameras; per-layer heads give class logits (sigmoid) and box codes whose centres are offsets from the
reference points in inverse-sigmoid space. Matching, losses and NMS-free decoding are PETR's.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from torch import nn

from vispe.encodings import PositionEncoding, build_encoding, check_encoding_fits, register_host
from vispe.encodings.camera import inverse_sigmoid
from vispe.encodings.hosts import EncodingHostError
from vispe.geometry import CameraGeometry, Cameras, Positions, SceneGeometry
from vispe.geometry.device_constants import device_constant, host_to_device
from vispe.models.box3d_targets import box3d_targets
from vispe.models.entry_checks import entry_checks
from vispe.models.inputs import check_image_batch, check_nonfinite_option, value_checks_enabled
from vispe.models.multiview_encoder import MultiViewEncoder
from vispe.models.petr.box_coder import denormalize_centers, nms_free_decode, yaw_from_ray_frame
from vispe.models.petr.centre_heatmap import CentreHeatmapHead
from vispe.models.petr.criterion import PETRCriterion
from vispe.models.petr.denoising import DenoisingQueries, QueryDenoising, denoising_losses, make_denoising_queries
from vispe.models.petr.local_yaw import LocalYawHead
from vispe.models.petr.token_queries import TokenQueries, proposal_loss
from vispe.models.petr.transformer import PETRDecoder
from vispe.registry import ENCODINGS, MODELS

# The hooks that act inside attention: the only ones that run in the decoder's cross-attention.
ATTENTION_HOOKS = frozenset({'rotate', 'transform_v', 'transform_out', 'logits_bias'})
NUSCENES_PC_RANGE = (-51.2, -51.2, -5.0, 51.2, 51.2, 3.0)
HOST = register_host('PETRDetector', provides=('grid', 'cameras', 'depth'), calls=('key_embedding', 'encode_queries'),
                     where='vispe.models.petr.PETRDetector (configs/petr: encoding), the camera protocol')
ENCODER_HOST = register_host('PETRDetector encoder', provides=('grid', 'cameras', 'depth'),
                             where='vispe.models.petr.PETRDetector (configs/petr: encoder.encoding)')
DECODER_HOST = register_host('PETRDetector decoder', provides=('grid', 'cameras', 'depth'),
                             where='vispe.models.petr.PETRDetector (configs/petr: decoder.encoding), its '
                                   'cross-attention between object queries posed at their reference points '
                                   '(SceneGeometry.poses) and the camera tokens (what it provides)')


def classification_branch(embed_dim: int, num_classes: int, num_fcs: int = 2) -> nn.Sequential:
    """PETR's ``cls_branch``: (Linear, LayerNorm, ReLU) × num_fcs, Linear to K logits (bias at prior 0.01)."""
    layers: list[nn.Module] = []
    for _ in range(num_fcs):
        layers += [nn.Linear(embed_dim, embed_dim), nn.LayerNorm(embed_dim), nn.ReLU(inplace=True)]
    head = nn.Linear(embed_dim, num_classes)
    nn.init.constant_(head.bias, -math.log((1 - 0.01) / 0.01))
    return nn.Sequential(*layers, head)


def regression_branch(embed_dim: int, code_size: int, num_fcs: int = 2) -> nn.Sequential:
    """PETR's ``reg_branch``: (Linear, ReLU) × num_fcs, Linear to the box code."""
    layers: list[nn.Module] = []
    for _ in range(num_fcs):
        layers += [nn.Linear(embed_dim, embed_dim), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers, nn.Linear(embed_dim, code_size))


def check_view_masks(masks: torch.Tensor | None, images: torch.Tensor) -> None:
    """masks (B, V, H, W) bool, True on real pixels, each present view's real pixels a top-left rectangle, and at
    least one present view per sample."""
    if masks is None:
        return
    if not isinstance(masks, torch.Tensor) or masks.dtype != torch.bool:
        raise TypeError(f'masks must be a bool tensor (B, V, H, W), True on real pixels; got '
                        f'{getattr(masks, "dtype", type(masks).__name__)}. vispe.multiview_collate makes them.')
    expected = (*images.shape[:2], *images.shape[-2:])
    if tuple(masks.shape) != expected:
        raise ValueError(f'masks must have shape (B, V, H, W) = {expected} to match the images '
                         f'{tuple(images.shape)}; got {tuple(masks.shape)}.')
    if not value_checks_enabled(masks):
        return
    flat = masks.flatten(0, 1)
    rows, cols = flat.any(2).sum(1), flat.any(1).sum(1)
    rectangle = ((torch.arange(flat.shape[1], device=flat.device) < rows[:, None])[:, :, None]
                 & (torch.arange(flat.shape[2], device=flat.device) < cols[:, None])[:, None, :])
    bad = ~(flat == rectangle).flatten(1).all(1)
    if bool(bad.any()):
        index = int(torch.nonzero(bad)[0, 0])
        raise ValueError(f'masks of sample {index // masks.shape[1]}, view {index % masks.shape[1]} are not a '
                         f'top-left rectangle of real pixels: views sit in the top-left corner, padded at the bottom '
                         f'and right, with the mask True on real pixels (vispe.multiview_collate).')
    empty = ~masks.flatten(2).any(2).any(1)
    if bool(empty.any()):
        raise ValueError(f'sample {int(torch.nonzero(empty)[0, 0])} has no real pixel in any view: a detector '
                         f'cannot predict from nothing; drop the sample.')


@MODELS.register_module()
class PETRDetector(BaseModel):
    """PETR / 3DPPE multi-view 3D detector.

    ``forward(inputs, masks, data_samples, mode)``: inputs (B, V, 3, H, W), masks (B, V, H, W) True on real pixels
    (a missing view all False), data samples with the cameras (``intrinsics``, ``lidar2cam``, ``pad_shape``) and in
    training ``gt_boxes`` (G, 7) and ``gt_labels`` (G,) (and ``depth`` (V, H, W) for a depth-supervised encoding).
    'loss' -> losses (``d{i}.`` for the auxiliary layers; the encoding's own, e.g. 3DPPE's depth losses);
    'predict' -> per sample ``dict(sample_token, boxes_3d (k, 7), scores (k,), labels_3d (k,))`` in the scene frame;
    'tensor' -> ``dict(logits (L, B, Q, K), code (L, B, Q, C))``.

    Args:
        backbone: config of a module with ``channels`` and ``stride`` (``dict(type='TimmFeatures', ...)``).
        num_classes: K.
        encoding: the camera encoding's config: one of the camera protocol with a query embedding (PETR, PPE3D,
            MultiViewSine; checked at build).
        decoder: :class:`PETRDecoder` arguments, and optionally ``encoding``: an attention encoding in its
            cross-attention between the object queries, each posed at its reference point (identity rotation,
            ``SceneGeometry.poses``), and the camera tokens: ``dict(type='GTA')`` makes the query-to-camera transform
            ``E_query · E_camera⁻¹`` what attention sees.
        num_queries: learnable 3D reference points (PETR: 900).
        embed_dim: d (256).
        pc_range: (xmin, ymin, zmin, xmax, ymax, zmax) that predicted centres span (nuScenes: ±51.2, −5..3).
        code_size: 8, or 10 with velocities (nuScenes).
        code_weights: L1 weight per code channel (default 1, and 0.2 for velocities).
        cls_weight, bbox_weight: loss and matching weights (2.0, 0.25).
        max_detections: boxes kept per sample (300).
        post_center_range: decoded centres outside it are dropped (default: pc_range widened by 10 m, as PETR).
        score_threshold: minimum score kept at inference (None).
        num_reg_fcs: hidden layers of the heads (2).
        nonfinite_inputs: 'raise', 'warn' or 'ignore' for NaN/inf pixels.
        denoising: PETRv2's query denoising in training (:class:`QueryDenoising` arguments, e.g.
            ``dict(groups=10)``; ``dn_loss_*`` losses); None: PETR's training (the default).
        centre_heatmap: a 2D auxiliary head on the backbone features in training (:class:`CentreHeatmapHead`
            arguments, e.g. ``dict(weight=1.0)``; ``loss_heatmap``); None: none (PETR).
        token_queries: draw the ``num_queries`` queries from the heatmap's best tokens, with content and reference
            points from the tokens and a proposal loss on the references (:class:`TokenQueries` arguments, e.g.
            ``dict(proposal_weight=0.25)``; ``loss_proposal``; needs ``centre_heatmap``); None: PETR's learnable
            reference points with zero content.
        encoder: a transformer encoder over the tokens of all views before the decoder, with its own encoding in
            its self-attention (:class:`~vispe.models.multiview_encoder.MultiViewEncoder`; e.g. ``dict(depth=2,
            num_heads=4, mlp_dim=512, dropout=0.1, encoding=dict(type='GTA'))``); None: none (PETR).
        yaw_frame: what the heads' yaw channels regress: ``'ego'`` the yaw itself (PETR), or ``'ray'`` the yaw
            relative to the bearing of the box centre from the ego origin, turned to the yaw before the losses and
            the decoding (:func:`~vispe.models.petr.box_coder.yaw_from_ray_frame`), so outputs and losses stay in the
            scene frame.
        local_yaw: a 2D auxiliary head in training that classifies every object's yaw relative to each view's ray
            at its projected centre (:class:`~vispe.models.petr.local_yaw.LocalYawHead` arguments, e.g.
            ``dict(bins=8, weight=1.0)``; ``loss_local_yaw``); None: none (PETR).
        yaw_loss: the matched boxes' yaw loss, ``'l1'`` (PETR) or ``'von_mises'``
            (:func:`~vispe.models.petr.criterion.von_mises_loss`).
    """

    def __init__(self, backbone: dict, num_classes: int, encoding: dict | None = None, decoder: dict | None = None,
                 num_queries: int = 900, embed_dim: int = 256, pc_range: Sequence[float] = NUSCENES_PC_RANGE,
                 code_size: int = 10, code_weights: Sequence[float] | None = None, cls_weight: float = 2.0,
                 bbox_weight: float = 0.25, max_detections: int = 300,
                 post_center_range: Sequence[float] | None = None, score_threshold: float | None = None,
                 num_reg_fcs: int = 2, nonfinite_inputs: str = 'raise', denoising: dict | None = None,
                 centre_heatmap: dict | None = None, token_queries: dict | None = None, encoder: dict | None = None,
                 yaw_frame: str = 'ego', local_yaw: dict | None = None, yaw_loss: str = 'l1',
                 data_preprocessor: dict | None = None,
                 init_cfg: dict | None = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor or entry_checks(nonfinite_inputs), init_cfg=init_cfg)
        if len(pc_range) != 6 or any(hi <= lo for lo, hi in zip(pc_range[:3], pc_range[3:])):
            raise ValueError(f'pc_range must be (xmin, ymin, zmin, xmax, ymax, zmax) with max > min; got {pc_range}.')
        self.nonfinite_inputs = check_nonfinite_option(nonfinite_inputs)
        if yaw_frame not in ('ego', 'ray'):
            raise ValueError(f"yaw_frame must be 'ego' (PETR: the heads regress the yaw) or 'ray' (the yaw relative to "
                             f"the bearing of the box centre); got {yaw_frame!r}.")
        self.yaw_frame = yaw_frame
        self.backbone = MODELS.build(backbone)
        self.encoding = build_encoding(encoding or dict(type='PETR'), embed_dim=embed_dim,
                                       in_channels=self.backbone.channels)
        check_encoding_fits(self.encoding, HOST)
        self.input_proj = nn.Conv2d(self.encoding.out_channels(self.backbone.channels), embed_dim, kernel_size=1)
        self.decoder, self.decoder_encoding = self._build_decoder(decoder, embed_dim)
        self.encoder, self.encoder_encoding = self._build_encoder(encoder, embed_dim)
        self.num_queries = num_queries
        self.reference_points = nn.Embedding(num_queries, 3) if token_queries is None else None
        self.token_queries = (TokenQueries(embed_dim, num_queries, **token_queries) if token_queries is not None
                              else None)
        cls_branch = classification_branch(embed_dim, num_classes, num_reg_fcs)
        reg_branch = regression_branch(embed_dim, code_size, num_reg_fcs)
        # PETR without box refinement shares one branch between the layers (its checkpoints list it per layer).
        self.cls_branches = nn.ModuleList([cls_branch] * len(self.decoder.layers))
        self.reg_branches = nn.ModuleList([reg_branch] * len(self.decoder.layers))
        self.num_classes = num_classes
        self.pc_range = tuple(float(v) for v in pc_range)
        self.post_center_range = tuple(post_center_range) if post_center_range is not None else (
            *(v - 10 for v in self.pc_range[:3]), *(v + 10 for v in self.pc_range[3:]))
        self.max_detections = max_detections
        self.score_threshold = score_threshold
        weights = code_weights if code_weights is not None else (1.0,) * 8 + (0.2,) * (code_size - 8)
        if len(weights) != code_size:
            raise ValueError(f'code_weights needs one weight per code channel ({code_size}); got {len(weights)}.')
        self.criterion = PETRCriterion(num_classes, weights, cls_weight, bbox_weight, yaw_loss=yaw_loss)
        self.denoising = QueryDenoising(**denoising) if denoising is not None else None
        self.centre_heatmap = (CentreHeatmapHead(self.backbone.channels, num_classes, **centre_heatmap)
                               if centre_heatmap is not None else None)
        self.local_yaw = LocalYawHead(self.backbone.channels, **local_yaw) if local_yaw is not None else None
        if token_queries is not None and self.centre_heatmap is None:
            raise ValueError('token_queries draws the queries by the centre heatmap: set centre_heatmap too, e.g. '
                             'centre_heatmap=dict(weight=1.0).')
        self._init_transformer()

    @staticmethod
    def _build_encoder(encoder: dict | None, embed_dim: int) -> tuple[MultiViewEncoder | None,
                                                                      PositionEncoding | None]:
        if encoder is None:
            return None, None
        options = dict(encoder)
        encoding = options.pop('encoding', dict(type='NoPE'))
        depth, num_heads = options.get('depth', 2), options.get('num_heads', 8)
        encoder_encoding = build_encoding(encoding, embed_dim=embed_dim, num_heads=num_heads,
                                          head_dim=embed_dim // num_heads, depth=depth)
        check_encoding_fits(encoder_encoding, ENCODER_HOST)
        return (MultiViewEncoder(embed_dim, **{'depth': depth, 'num_heads': num_heads, 'mlp_dim': 4 * embed_dim,
                                               **options}), encoder_encoding)

    @staticmethod
    def _build_decoder(decoder: dict | None, embed_dim: int) -> tuple[PETRDecoder, PositionEncoding | None]:
        options = dict(decoder or {})
        encoding = options.pop('encoding', None)
        module = PETRDecoder(embed_dim=embed_dim, **options)
        if encoding is None:
            return module, None
        num_heads = module.layers[0].cross_attn.num_heads
        decoder_encoding = build_encoding(encoding, embed_dim=embed_dim, num_heads=num_heads,
                                          head_dim=embed_dim // num_heads, depth=len(module.layers))
        check_encoding_fits(decoder_encoding, DECODER_HOST)
        name = type(decoder_encoding).__name__
        if not decoder_encoding.reads_poses or not decoder_encoding.active_hooks & ATTENTION_HOOKS:
            readers = [other for other, cls in ENCODINGS.module_dict.items() if getattr(cls, 'reads_poses', False)]
            raise EncodingHostError(f'{name} cannot act in {DECODER_HOST.name}: its queries carry only a pose each '
                                    f'(their reference points) and only attention hooks run there, so an encoding '
                                    f'must read posed queries (reads_poses) with attention hooks. Encodings that '
                                    f'do: {", ".join(readers)}. A key embedding for the camera tokens is the '
                                    f'detector\'s own encoding (model.encoding).')
        return module, decoder_encoding

    def query_positions(self, reference: torch.Tensor) -> Positions:
        """The queries' positions for the decoder's encoding: each query posed at its reference point (B, Q, 3)
        in [0, 1] of ``pc_range``, as the rigid transform scene -> query frame ``[[I, −p], [0, 1]]`` with p the
        point in metres (the ego frame's axes)."""
        low = device_constant(self.pc_range[:3], reference)
        point = low + reference * (device_constant(self.pc_range[3:], reference) - low)
        batch, count = point.shape[:2]
        rotation = torch.eye(3, dtype=point.dtype, device=point.device).expand(batch, count, 3, 3)
        top = torch.cat([rotation, -point[..., None]], -1)
        bottom = device_constant([0.0, 0.0, 0.0, 1.0], point).expand(batch, count, 1, 4)
        poses = torch.cat([top, bottom], -2)
        return Positions(num_positions=count, device=point.device,
                         scene=SceneGeometry(poses=poses, check_values=False))

    def _init_transformer(self) -> None:
        """PETR's initialisation: Xavier-uniform decoder matrices, reference points U(0, 1)."""
        for parameter in self.decoder.parameters():
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)
        if self.reference_points is not None:
            nn.init.uniform_(self.reference_points.weight, 0, 1)

    def check_inputs(self, inputs: torch.Tensor, masks: torch.Tensor | None) -> None:
        """Images (B, V, 3, H, W) of at least one stride a side, on the model's device and dtype, finite; masks."""
        if not isinstance(inputs, torch.Tensor) or inputs.ndim != 5:
            shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__
            raise ValueError(f'PETRDetector takes the images of all cameras as (B, V, 3, H, W); got {shape}. '
                             f'vispe.multiview_collate stacks the views of each sample.')
        stride = self.backbone.stride
        check_image_batch(inputs.flatten(0, 1), getattr(self.backbone, 'in_chans', None),
                          next(self.backbone.parameters(), None), self.nonfinite_inputs, min_side=stride,
                          min_side_reason=f'the backbone reduces by {stride}')
        check_view_masks(masks, inputs)

    def memory_positions(self, batch: int, views: int, feat_size: Sequence[int], masks: torch.Tensor | None,
                         cameras: Cameras, depth: torch.Tensor | None = None) -> Positions:
        """The memory's positions: V grids of (h, w) cells, their validity (masks resized, nearest), the cameras and
        the measured pixel depth (B, V, H, W) when the data has it."""
        valid = None
        if masks is not None:
            valid = F.interpolate(masks.flatten(0, 1)[:, None].float(), size=tuple(feat_size))[:, 0].bool()
            valid = valid.view(batch, views, *feat_size)
        stride = self.backbone.stride
        return Positions(tuple(feat_size), patch_size=(stride, stride), device=cameras.device, valid_mask=valid,
                         num_views=views, camera=CameraGeometry(cameras, depth=depth))

    def predict_sets(self, inputs: torch.Tensor, masks: torch.Tensor | None,
                     data_samples: list[Mapping[str, Any]] | None,
                     denoising: DenoisingQueries | None = None) -> dict[str, Any]:
        """Class logits (L, B, Q, K) and box codes (L, B, Q, C), centres in metres; the memory's positions and the
        encoding's extras, the centre heatmap's logits (B·V, K, h, w) when it ran (training, or token queries), the
        queries' reference points (B, Q, 3) in [0, 1] and, with token queries, their tokens' indices (B, Q) (else
        None). With ``denoising`` its P slots come first: (L, B, P + Q, ·)."""
        self.check_inputs(inputs, masks)
        cameras = Cameras.from_batch(data_samples, inputs.device)
        if cameras is None:
            raise ValueError('PETRDetector needs each data sample\'s cameras (intrinsics, lidar2cam, pad_shape); '
                             'MultiViewDetection gives them.')
        cameras.check_images(inputs)
        batch, views = inputs.shape[:2]
        image_features = self.backbone(inputs.flatten(0, 1))
        pos = self.memory_positions(batch, views, image_features.shape[-2:], masks, cameras,
                                    self.depth_maps(data_samples, inputs.device))
        encoded = self.encoding.encode_features(image_features, pos)
        features = self.input_proj(encoded.features)
        memory = features.view(batch, views, *features.shape[1:]).permute(0, 1, 3, 4, 2).flatten(1, 3)
        key_valid = pos.token_valid()
        if self.encoder is not None:
            self.encoder_encoding.prepare(pos)
            memory = self.encoder(memory, pos, self.encoder_encoding, key_valid)
        key_embed = self.encoding.key_embedding(pos, batch, encoded.extras).to(memory.dtype)
        heatmap = content = query_index = None
        if self.centre_heatmap is not None and (self.training or self.token_queries is not None):
            heatmap = self.centre_heatmap(image_features)
        local_yaw = self.local_yaw(image_features) if self.local_yaw is not None and self.training else None
        if self.token_queries is not None:
            content, reference, query_index = self.token_queries(memory, key_embed, heatmap, key_valid)
        else:
            reference = self.reference_points.weight[None].expand(batch, -1, -1)
        self_attn_mask = None
        if denoising is not None:
            reference = torch.cat([denoising.reference.to(reference.dtype), reference], 1)
            self_attn_mask = denoising.self_attn_mask
            if content is not None:
                content = torch.cat([content.new_zeros(batch, denoising.num_slots, content.shape[-1]), content], 1)
        query_pos = self.encoding.encode_queries(reference)
        pos_q = None
        if self.decoder_encoding is not None:
            pos_q = self.query_positions(reference)
            self.decoder_encoding.prepare(pos_q)
            self.decoder_encoding.prepare(pos)
        hidden = self.decoder(query_pos, memory, key_embed, key_valid, self_attn_mask, content,
                              self.decoder_encoding, pos_q, pos)
        logits = torch.stack([branch(layer) for branch, layer in zip(self.cls_branches, hidden)])
        raw = torch.stack([branch(layer) for branch, layer in zip(self.reg_branches, hidden)])
        anchor = inverse_sigmoid(reference)
        centers = torch.cat([raw[..., 0:2] + anchor[..., 0:2], raw[..., 2:4], raw[..., 4:5] + anchor[..., 2:3],
                             raw[..., 5:]], -1)
        normalised = torch.cat([centers[..., 0:2].sigmoid(), centers[..., 2:4], centers[..., 4:5].sigmoid(),
                                centers[..., 5:]], -1)
        code = denormalize_centers(normalised, self.pc_range)
        if self.yaw_frame == 'ray':
            code = yaw_from_ray_frame(code)
        return dict(logits=logits, code=code, pos=pos,
                    extras=encoded.extras, heatmap=heatmap, local_yaw=local_yaw, reference=reference,
                    query_index=query_index)

    def targets(self, data_samples: list[Mapping[str, Any]], device: torch.device) -> tuple[list, list, list | None]:
        """Per sample gt boxes (G, 7), labels (G,) and, for a 10-channel code, velocities (G, 2), checked."""
        boxes, labels = box3d_targets(data_samples, device, self.num_classes, 'MultiViewDetection')
        if self.criterion.code_size != 10:
            return boxes, labels, None
        velocities = []
        for index, sample in enumerate(data_samples):
            if 'gt_velocities' not in sample:
                raise ValueError(f'data_samples[{index}] has no gt_velocities, which a model with code_size=10 '
                                 f'regresses (MultiViewDetection gives them); use code_size=8 for static scenes.')
            velocities.append(torch.as_tensor(sample['gt_velocities'], dtype=torch.float32, device=device).reshape(-1, 2))
        return boxes, labels, velocities

    @staticmethod
    def depth_maps(data_samples: list[Mapping[str, Any]] | None, device: torch.device) -> torch.Tensor | None:
        """(B, V, H, W) depth of every sample when all carry one (``with_depth=True`` in the dataset)."""
        if not data_samples or not all(isinstance(s, Mapping) and 'depth' in s for s in data_samples):
            return None
        return host_to_device(torch.stack([torch.as_tensor(s['depth'], dtype=torch.float32) for s in data_samples]),
                              device)

    def loss(self, inputs: torch.Tensor, masks: torch.Tensor | None,
             data_samples: list[Mapping[str, Any]] | None) -> dict[str, torch.Tensor]:
        """The set losses of the matching queries, the encoding's own, PETRv2's denoising losses and the centre
        heatmap's where configured."""
        boxes, labels, velocities = self.targets(data_samples, inputs.device)
        denoising = None
        if self.denoising is not None:
            denoising = make_denoising_queries(self.denoising, boxes, labels, self.num_classes,
                                               self.num_queries, self.pc_range,
                                               self.criterion.code_size, velocities)
        outputs = self.predict_sets(inputs, masks, data_samples, denoising)
        logits, code = outputs['logits'], outputs['code']
        losses = {}
        if denoising is not None:
            slots = denoising.num_slots
            losses.update(denoising_losses(self.denoising, denoising, logits[:, :, :slots], code[:, :, :slots],
                                           self.criterion.code_weights, self.criterion.cls_weight,
                                           self.criterion.bbox_weight, self.criterion.alpha, self.criterion.gamma))
            logits, code = logits[:, :, slots:], code[:, :, slots:]
        losses.update(self.criterion(logits, code, boxes, labels, velocities))
        losses.update(self.encoding.losses(outputs['extras'], outputs['pos']))
        if self.centre_heatmap is not None:
            pos = outputs['pos']
            losses['loss_heatmap'] = self.centre_heatmap.loss(outputs['heatmap'], pos.camera.cameras, boxes, labels,
                                                              self.backbone.stride, pos.valid_mask)
        if self.local_yaw is not None:
            pos = outputs['pos']
            losses['loss_local_yaw'] = self.local_yaw.loss(outputs['local_yaw'], pos.camera.cameras, boxes,
                                                           self.backbone.stride, pos.valid_mask)
        if self.token_queries is not None:
            pos = outputs['pos']
            losses['loss_proposal'] = self.token_queries.proposal_weight * proposal_loss(
                outputs['reference'][:, -self.num_queries:], outputs['query_index'], pos.camera.cameras, boxes,
                pos.grid_size, self.backbone.stride, self.pc_range)
        return losses

    def forward(self, inputs: torch.Tensor, masks: torch.Tensor | None = None,
                data_samples: list[Mapping[str, Any]] | None = None, mode: str = 'tensor') -> Any:
        if mode not in ('loss', 'predict', 'tensor'):
            raise ValueError(f"mode must be 'loss', 'predict' or 'tensor'; got {mode!r}.")
        if data_samples is not None and isinstance(inputs, torch.Tensor) and len(data_samples) != len(inputs):
            raise ValueError(f'{len(data_samples)} data samples for a batch of {len(inputs)}: give one per sample.')
        if mode == 'loss':
            return self.loss(inputs, masks, data_samples)
        outputs = self.predict_sets(inputs, masks, data_samples)
        if mode == 'tensor':
            return dict(logits=outputs['logits'], code=outputs['code'])
        results = nms_free_decode(outputs['logits'][-1], outputs['code'][-1], self.max_detections,
                                  self.post_center_range, self.score_threshold)
        for result, sample in zip(results, data_samples):
            result['sample_token'] = sample.get('sample_token') if isinstance(sample, Mapping) else None
        return results
