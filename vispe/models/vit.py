"""timm's Vision Transformer with a position encoding that reaches every block, at any resolution.

``VisionTransformer`` subclasses timm's: the constructor, parameter names and pooling/heads are
timm's. What changes is the forward: it builds one :class:`~vispe.geometry.Positions` per forward
from the real patch grid and hands it, with the model's encoding, to every block (as timm's Eva
hands ``rope=`` to its blocks), so per-resolution tables are built once per forward.

``retrofit`` converts an existing timm ``VisionTransformer`` instance in place, keeping its weights: the one
conversion every vispe ViT goes through (``create_vit`` in :mod:`vispe.models.vit_factory` builds timm's
architecture by name and converts it).
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import torch
from timm.layers import Attention as TimmAttention
from timm.layers import Format, register_notrace_function, register_notrace_module
from timm.models import VisionTransformer as TimmVisionTransformer
from timm.models import checkpoint
from timm.models.vision_transformer import Block as TimmBlock
from torch import nn

from vispe.attention import Attention
from vispe.encodings import LearnedAPE, PositionEncoding, build_encoding, check_encoding_fits, register_host
from vispe.encodings.builder import EncodingConfig
from vispe.geometry import GEOMETRY, ImageGeometry, Positions, feature_grid_size
from vispe.models.inputs import check_image_batch, check_nonfinite_option
from vispe.models.vit_features import feature_take_indices
from vispe.registry import MODELS

DEFAULT_ENCODING = {'type': 'LearnedAPE'}
RESERVED_TIMM_ARGS = ('pos_embed', 'block_fn', 'attn_layer')
HOST = register_host('VisionTransformer', provides=('grid', 'pixels'),
                     where='vispe.create_vit, vispe.retrofit, TimmViT configs; extra_geometry= when a host gives more '
                           '(CropDepthViT)')


def timm_arguments(encoding: EncodingConfig, kwargs: dict[str, Any], keep_pos_embed: bool = False) -> dict[str, Any]:
    """timm's constructor arguments for a ViT that will carry ``encoding``: the user's ``kwargs`` (without the
    arguments vispe sets: ``pos_embed``, ``block_fn``, ``attn_layer`` are refused, ``dynamic_img_size=False`` too),
    ``dynamic_img_size=True``, and timm's learned ``pos_embed`` when the encoding includes a ``LearnedAPE`` that takes
    it over (or ``keep_pos_embed``: pretrained weights load into it), none otherwise."""
    for reserved in RESERVED_TIMM_ARGS:
        if reserved in kwargs:
            raise TypeError(f'vispe sets {reserved!r} itself; choose the position encoding with encoding=...')
    arguments = dict(kwargs)
    if not arguments.pop('dynamic_img_size', True):
        raise ValueError('dynamic_img_size=False: vispe models always take any image size divisible by the patch '
                         'size (their encodings follow the grid); leave dynamic_img_size out or pass True.')
    arguments['dynamic_img_size'] = True
    ape_cfg = _ape_config(encoding)
    if not keep_pos_embed:
        arguments['pos_embed'] = 'learn' if ape_cfg else 'none'
    if ape_cfg is not None and 'no_embed_class' in ape_cfg:
        arguments['no_embed_class'] = ape_cfg['no_embed_class']
    return arguments


def image_positions(images: torch.Tensor, in_chans: int, reference: torch.Tensor | None, nonfinite_inputs: str,
                    patch_size: tuple[int, int], dynamic_img_pad: bool, num_prefix_tokens: int) -> Positions:
    """Check an image batch (:func:`~vispe.models.inputs.check_image_batch`: rank, channels, size, device, dtype,
    non-finite pixels by ``nonfinite_inputs``; ``reference`` is the parameter whose device and dtype the images
    need) and return the :class:`Positions` of its patch grid, which carry the images (``pixels``).

    A leaf for timm's torch.fx feature extraction (``register_notrace_function``): the grid depends on the
    input's shape, which symbolic tracing does not know."""
    check_image_batch(images, in_chans, reference, nonfinite_inputs,
                      channels_fix=', or build the model with in_chans={channels}')
    grid = feature_grid_size(images.shape[-2:], patch_size, dynamic_img_pad)
    return Positions(grid, num_prefix_tokens=num_prefix_tokens, patch_size=tuple(patch_size), device=images.device,
                     image=ImageGeometry(images))


def encode_tokens(encoding: PositionEncoding, x: torch.Tensor, pos: Positions) -> torch.Tensor:
    """The encoding's per-forward tables (``prepare``) and its ``embed`` hook; a leaf for torch.fx."""
    encoding.prepare(pos)
    return encoding.embed(x, pos)


def tokens_between_blocks(encoding: PositionEncoding, x: torch.Tensor, pos: Positions,
                          layer_idx: int) -> torch.Tensor:
    """The encoding's ``between_blocks`` hook after block ``layer_idx``; a leaf for torch.fx."""
    return encoding.between_blocks(x, pos, layer_idx)


def causal_attn_mask(attn_mask: torch.Tensor | None, is_causal: bool, tokens: torch.Tensor) -> torch.Tensor | None:
    """timm's ``is_causal`` as one mask that encoding biases can join; a leaf for torch.fx (``is_causal`` is then a
    traced value). Without ``is_causal``, ``attn_mask`` as given. With it, token i attends to tokens j <= i of
    ``tokens`` (B, N, C) (SDPA's top-left causal mask over all tokens, prefix included), combined with
    ``attn_mask`` (bool: both must allow; additive float: -inf where the causal mask forbids): (N, N), or the
    broadcast shape of ``attn_mask``."""
    if not is_causal:
        return attn_mask
    num_tokens, device = tokens.shape[1], tokens.device
    causal = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).tril()
    if attn_mask is None:
        return causal
    if attn_mask.dtype == torch.bool:
        return attn_mask & causal
    return torch.where(causal, attn_mask, torch.full((), float('-inf'), dtype=attn_mask.dtype, device=device))


for _leaf in (image_positions, encode_tokens, tokens_between_blocks, causal_attn_mask):
    register_notrace_function(_leaf)


@register_notrace_module
class Block(TimmBlock):
    """timm's pre-norm transformer ``Block`` whose attention receives positions and the encoding.

    A leaf for timm's torch.fx feature extraction (its positions are a traced value, not tensors), so
    ``timm.models.create_feature_extractor`` returns block outputs.

    Shapes: x (B, N, C) -> (B, N, C).
    """

    def forward(
            self,
            x: torch.Tensor,
            pos: Positions | None = None,
            encoding: PositionEncoding | None = None,
            layer_idx: int = 0,
            attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x), pos, encoding, layer_idx, attn_mask)))
        x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
        return x


@MODELS.register_module()
class VisionTransformer(TimmVisionTransformer):
    """A timm ``VisionTransformer`` whose position encoding is any vispe encoding.

    Takes timm's constructor arguments (``img_size`` is the training size: it sets the grid of
    learned tables) plus ``encoding``. The model always accepts any input size divisible by the
    patch size (or any size with ``dynamic_img_pad=True``). Every vispe ViT is made one way: timm builds
    its ViT and :func:`retrofit` converts it (this constructor is timm's followed by that conversion;
    ``create_vit`` is ``timm.create_model`` followed by it).

    Args:
        encoding: an encoding config, instance or list (see :func:`vispe.build_encoding`);
            default ``dict(type='LearnedAPE')``, timm's own.
        nonfinite_inputs: what a batch with NaN or ±inf pixels does: 'raise' (ValueError), 'warn'
            (RuntimeWarning) or 'ignore' (no check). Also a plain attribute.
        extra_geometry: what the positions the model runs with carry beyond the patch grid, when a host builds
            them and runs the blocks (:class:`~vispe.models.CropDepthViT`: ``('cameras', 'crop_boxes')``); the
            encoding is checked against the grid and this at build.
        **kwargs: timm ``VisionTransformer`` arguments except ``pos_embed``, ``block_fn`` and
            ``attn_layer``, which vispe sets; ``dynamic_img_size`` may be True (vispe models always are).

    Shapes: images (B, C, H, W) -> logits (B, num_classes); ``forward_features`` -> (B, prefix + h·w, C).
    """

    encoding: PositionEncoding
    nonfinite_inputs: str = 'raise'
    extra_geometry: tuple[str, ...] = ()

    def __init__(self, *args: Any, encoding: EncodingConfig | None = None, nonfinite_inputs: str = 'raise',
                 extra_geometry: Sequence[str] = (), **kwargs: Any) -> None:
        encoding = DEFAULT_ENCODING if encoding is None else encoding
        check_nonfinite_option(nonfinite_inputs)
        super().__init__(*args, **timm_arguments(encoding, kwargs))
        retrofit(self, encoding, nonfinite_inputs, extra_geometry)

    def encoding_context(self) -> dict[str, Any]:
        """Facts about this model that encodings take as constructor arguments."""
        first_attn = self.blocks[0].attn
        return dict(
            embed_dim=self.embed_dim,
            num_heads=first_attn.num_heads,
            head_dim=first_attn.head_dim,
            depth=len(self.blocks),
            grid_size=tuple(self.patch_embed.grid_size),
            patch_size=tuple(self.patch_embed.patch_size),
            num_prefix_tokens=self.num_prefix_tokens,
            in_chans=self.patch_embed.proj.in_channels,
        )

    def attach_encoding(self, encoding: EncodingConfig, timm_pos_embed: nn.Parameter | None = None) -> None:
        """Build ``encoding`` for this model and make it the model's encoding.

        Args:
            encoding: config, instance or list.
            timm_pos_embed: a timm ``pos_embed`` parameter for a :class:`LearnedAPE` built from a
                config to take over (weights kept).
        """
        built = build_encoding(encoding, **self.encoding_context())
        check_encoding_fits(built, HOST, provides=(*HOST.provides, *self.extra_geometry))
        if timm_pos_embed is not None:
            _adopt_pos_embed(built, timm_pos_embed, encoding)
        self.pos_embed = None
        self.encoding = built
        self._state_dict_aliases = _timm_aliases(built)
        if not getattr(self, '_alias_hooks_registered', False):
            self._register_state_dict_hook(_rename_to_timm)
            self.register_load_state_dict_pre_hook(_rename_from_timm)
            self._alias_hooks_registered = True

    def positions(self, x: torch.Tensor) -> Positions:
        """Check an image batch and return the :class:`Positions` of its patch grid (:func:`image_positions`)."""
        return image_positions(x, self.in_chans, next(self.patch_embed.parameters(), None), self.nonfinite_inputs,
                               tuple(self.patch_embed.patch_size), self.patch_embed.dynamic_img_pad,
                               self.num_prefix_tokens)

    def embed_tokens(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        """Patch embedding, prefix tokens, the encoding's per-forward tables and its ``embed`` hook.

        Returns (B, prefix + h·w, C).
        """
        x = self.patch_embed(x)
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        prefix = []
        if self.cls_token is not None:
            prefix.append(self.cls_token.expand(x.shape[0], -1, -1))
        if self.reg_token is not None:
            prefix.append(self.reg_token.expand(x.shape[0], -1, -1))
        if prefix:
            x = torch.cat(prefix + [x], dim=1)
        x = encode_tokens(self.encoding, x, pos)
        return self.norm_pre(self.patch_drop(self.pos_drop(x)))

    def run_block(self, index: int, x: torch.Tensor, pos: Positions,
                  attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Block ``index`` and the encoding's ``between_blocks`` hook after it."""
        block = self.blocks[index]
        if self.grad_checkpointing and not torch.jit.is_scripting():
            x = checkpoint(block, x, pos, self.encoding, index, attn_mask)
        else:
            x = block(x, pos, self.encoding, index, attn_mask)
        return tokens_between_blocks(self.encoding, x, pos, index)

    def forward_features(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None,
                         is_causal: bool = False) -> torch.Tensor:
        pos = self.positions(x)
        x = self.embed_tokens(x, pos)
        attn_mask = causal_attn_mask(attn_mask, is_causal, x)
        for index in range(len(self.blocks)):
            x = self.run_block(index, x, pos, attn_mask)
        return self.norm(x)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        return self.forward_head(self.forward_features(x, attn_mask=attn_mask, is_causal=is_causal))

    def forward_intermediates(
            self,
            x: torch.Tensor,
            indices: int | list[int] | None = None,
            return_prefix_tokens: bool = False,
            norm: bool = False,
            stop_early: bool = False,
            output_fmt: str = 'NCHW',
            intermediates_only: bool = False,
            output_dict: bool = False,
            attn_mask: torch.Tensor | None = None,
            is_causal: bool = False,
    ) -> list[torch.Tensor] | tuple[torch.Tensor, list[torch.Tensor]] | dict[str, Any]:
        """timm's ``forward_intermediates`` (same arguments and outputs, ``output_dict`` and ``is_causal``
        included) with positions threaded through."""
        if output_fmt not in ('NCHW', 'NLC'):
            raise ValueError(f'output_fmt must be NCHW or NLC; got {output_fmt!r}.')
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        pos = self.positions(x)
        batch = x.shape[0]
        x = self.embed_tokens(x, pos)
        attn_mask = causal_attn_mask(attn_mask, is_causal, x)
        last = max_index if stop_early else len(self.blocks) - 1
        intermediates = []
        for index in range(last + 1):
            x = self.run_block(index, x, pos, attn_mask)
            if index in take_indices:
                intermediates.append(self.norm(x) if norm else x)
        prefix_tokens = [y[:, :self.num_prefix_tokens] for y in intermediates]
        intermediates = [y[:, self.num_prefix_tokens:] for y in intermediates]
        if output_fmt == 'NCHW':
            height, width = pos.grid_size
            intermediates = [y.reshape(batch, height, width, -1).permute(0, 3, 1, 2).contiguous()
                             for y in intermediates]
        if output_dict:
            result: dict[str, Any] = {'image_intermediates': intermediates}
            if return_prefix_tokens and self.num_prefix_tokens:
                result['image_intermediates_prefix'] = prefix_tokens
            if not intermediates_only:
                result['image_features'] = self.norm(x)
            return result
        if return_prefix_tokens and self.num_prefix_tokens:
            intermediates = list(zip(intermediates, prefix_tokens))
        if intermediates_only:
            return intermediates
        return self.norm(x), intermediates

    def __prepare_scriptable__(self) -> VisionTransformer:
        """``torch.jit.script`` calls this first: vispe models are not scriptable (encodings are typed Python
        modules and positions a dataclass), and TorchScript is deprecated; say so and name what works."""
        raise RuntimeError('vispe models do not support torch.jit.script (TorchScript is deprecated in PyTorch). '
                           'Use torch.export.export(model, (images,)) for a graph to deploy, or torch.compile(model) '
                           'for speed; both trace every vispe encoding.')

    @torch.jit.ignore
    def no_weight_decay(self) -> set[str]:
        """Prefix tokens and the encoding's own no-decay parameters (names as in ``named_parameters``)."""
        return {'cls_token', 'reg_token', 'dist_token'} | {f'encoding.{name}' for name in self.encoding.no_weight_decay()}

    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> dict[str, Any]:
        return dict(
            stem=r'^cls_token|reg_token|pos_embed|patch_embed|norm_pre|encoding',
            blocks=[(r'^blocks\.(\d+)', None), (r'^norm', (99999,))],
        )


def _encoding_members(encoding: PositionEncoding) -> list[PositionEncoding]:
    return list(encoding.encodings) if hasattr(encoding, 'encodings') else [encoding]


def _config_members(cfg: EncodingConfig) -> list[Any]:
    return list(cfg) if isinstance(cfg, Sequence) and not isinstance(cfg, str) else [cfg]


def _is_ape_config(cfg: Any) -> bool:
    return (cfg == 'LearnedAPE' or (isinstance(cfg, dict) and cfg.get('type') in ('LearnedAPE', LearnedAPE)))


def _adopt_pos_embed(encoding: PositionEncoding, pos_embed: nn.Parameter, cfg: EncodingConfig) -> None:
    """Hand a timm ``pos_embed`` to the LearnedAPE built from a config (not to a given instance)."""
    for member, member_cfg in zip(_encoding_members(encoding), _config_members(cfg)):
        if isinstance(member, LearnedAPE) and _is_ape_config(member_cfg):
            if member.pos_embed.shape != pos_embed.shape:
                raise ValueError(f'The timm pos_embed {tuple(pos_embed.shape)} does not fit LearnedAPE '
                                 f'{tuple(member.pos_embed.shape)} (grid_size {member.grid_size}, no_embed_class '
                                 f'{member.no_embed_class}): leave grid_size and num_prefix_tokens to the model (its '
                                 f'img_size / patch_size grid) and set no_embed_class as the timm model has it.')
            member.pos_embed = pos_embed
            return


def _timm_aliases(encoding: PositionEncoding) -> dict[str, str]:
    """State-dict names under which encoding parameters appear (timm's), e.g. encoding.pos_embed -> pos_embed."""
    aliases: dict[str, str] = {}
    for module_name, module in encoding.named_modules():
        for local, timm_name in getattr(module, 'timm_names', {}).items():
            if timm_name in aliases.values():
                raise ValueError(f'Two encodings would save a parameter as {timm_name!r}; compose at most one of them.')
            path = '.'.join(part for part in ('encoding', module_name, local) if part)
            aliases[path] = timm_name
    return aliases


def _rename_to_timm(module: VisionTransformer, state_dict: dict[str, Any], prefix: str, _metadata: Any) -> None:
    for ours, timms in module._state_dict_aliases.items():
        if prefix + ours in state_dict:
            state_dict[prefix + timms] = state_dict.pop(prefix + ours)


def _rename_from_timm(module: VisionTransformer, state_dict: dict[str, Any], prefix: str, *_args: Any) -> None:
    for ours, timms in module._state_dict_aliases.items():
        if prefix + timms in state_dict and prefix + ours not in state_dict:
            state_dict[prefix + ours] = state_dict.pop(prefix + timms)


def retrofit(model: TimmVisionTransformer, encoding: EncodingConfig | None = None,
             nonfinite_inputs: str | None = None, extra_geometry: Sequence[str] | None = None) -> VisionTransformer:
    """Put an encoding into an existing timm ``VisionTransformer``, in place, keeping its weights: the one
    conversion every vispe ViT goes through (the :class:`VisionTransformer` constructor and ``create_vit`` call it).

    The instance becomes a :class:`VisionTransformer` (a subclass of timm's, so ``isinstance``
    checks still hold), its blocks vispe :class:`Block` and its attentions vispe :class:`Attention`;
    no parameter is created or copied except the new encoding's. ``encoding`` says everything the
    model will have: a learned APE it had is kept only if ``encoding`` includes
    ``dict(type='LearnedAPE')`` (which then takes the timm parameter over), e.g.
    ``encoding=['LearnedAPE', dict(type='RoPEAxial')]``. A vispe ViT gets the new encoding.

    Args:
        model: a timm ``VisionTransformer`` with standard ``Block``/``Attention`` layers, or a vispe ViT.
        encoding: config, instance or list; default ``LearnedAPE``.
        nonfinite_inputs: 'raise', 'warn' or 'ignore' for NaN/inf pixels (see :class:`VisionTransformer`);
            None keeps the setting of a vispe model ('raise' for a timm model).
        extra_geometry: what a host gives the positions beyond the patch grid (see :class:`VisionTransformer`);
            None keeps a vispe model's (nothing for a timm model).

    Returns:
        The same object, converted.

    Raises:
        EncodingHostError: the encoding requires geometry that the ViT's positions do not carry.
    """
    encoding = DEFAULT_ENCODING if encoding is None else encoding
    if nonfinite_inputs is not None:
        check_nonfinite_option(nonfinite_inputs)
    if extra_geometry is not None:
        unknown = sorted(set(extra_geometry) - set(GEOMETRY))
        if unknown:
            raise ValueError(f'extra_geometry names unknown geometry {unknown}; known: {", ".join(GEOMETRY)}.')
    if isinstance(model, VisionTransformer) and 'encoding' in model._modules:
        current = next((m for m in _encoding_members(model.encoding) if isinstance(m, LearnedAPE)), None)
        if extra_geometry is not None:
            model.extra_geometry = tuple(extra_geometry)
        model.attach_encoding(encoding, timm_pos_embed=None if current is None else current.pos_embed)
        if nonfinite_inputs is not None:
            model.nonfinite_inputs = nonfinite_inputs
        return model
    if not isinstance(model, TimmVisionTransformer):
        raise TypeError(f'retrofit converts a timm VisionTransformer; got {type(model).__name__}. '
                        f'(timm Eva models, e.g. vit_*_rope_*, already carry their own rotary encoding.)')
    for index, block in enumerate(model.blocks):
        if type(block) is not TimmBlock or type(block.attn) is not TimmAttention:
            raise TypeError(f'retrofit supports timm Block with timm Attention; block {index} is '
                            f'{type(block).__name__} with {type(block.attn).__name__}.')
    if not isinstance(model.patch_drop, nn.Identity):
        raise ValueError('patch_drop_rate > 0 is not supported by vispe ViTs: dropped patches would leave the grid '
                         'that relative and rotary encodings index. Build with patch_drop_rate=0 (drop_path_rate or '
                         'mixup regularise instead).')
    for block in model.blocks:
        block.__class__ = Block
        block.attn.__class__ = Attention
    timm_pos_embed = model.pos_embed
    model.__class__ = VisionTransformer
    model.dynamic_img_size = True
    model.patch_embed.strict_img_size = False
    model.patch_embed.flatten = False
    model.patch_embed.output_fmt = Format.NHWC
    model.nonfinite_inputs = nonfinite_inputs or VisionTransformer.nonfinite_inputs
    model.extra_geometry = tuple(extra_geometry or ())
    model.attach_encoding(encoding, timm_pos_embed=timm_pos_embed)
    if timm_pos_embed is not None and not any(m.pos_embed is timm_pos_embed for m in
                                              _encoding_members(model.encoding) if isinstance(m, LearnedAPE)):
        warnings.warn('retrofit dropped the model\'s learned pos_embed: the encoding does not include '
                      'LearnedAPE. Pass encoding=["LearnedAPE", ...] to keep it.', stacklevel=2)
    return model


def _ape_config(encoding: EncodingConfig) -> dict[str, Any] | None:
    for member in _config_members(encoding):
        if _is_ape_config(member):
            return member if isinstance(member, dict) else {'type': 'LearnedAPE'}
    return None
