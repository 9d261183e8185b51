"""timm's Vision Transformer with a position encoding that reaches every block, at any resolution.

``VisionTransformer`` subclasses timm's: the constructor, parameter names and pooling/heads are
timm's. What changes is the forward: it builds one :class:`~vispe.geometry.Positions` per forward
from the real patch grid and hands it, with the model's encoding, to every block (as timm's Eva
hands ``rope=`` to its blocks), so per-resolution tables are built once per forward.

``create_vit`` builds any timm ViT architecture by name and ``retrofit`` converts an existing timm
``VisionTransformer`` instance in place, keeping its weights.
"""
from __future__ import annotations

import difflib
import warnings
from typing import Any, Sequence

import timm
import torch
from timm.layers import Attention as TimmAttention
from timm.layers import Format, register_notrace_function, register_notrace_module
from timm.models import VisionTransformer as TimmVisionTransformer
from timm.models._features import FeatureGetterNet, feature_take_indices
from timm.models._builder import pretrained_cfg_for_features
from timm.models._manipulate import checkpoint
from timm.models.vision_transformer import Block as TimmBlock
from torch import nn

from vispe.attention import Attention
from vispe.encodings import LearnedAPE, PositionEncoding, build_encoding
from vispe.encodings.builder import EncodingConfig
from vispe.geometry import Positions, feature_grid_size, to_2tuple
from vispe.models.inputs import check_image_batch, check_nonfinite_option
from vispe.registry import MODELS

DEFAULT_ENCODING = {'type': 'LearnedAPE'}
RESERVED_TIMM_ARGS = ('pos_embed', 'block_fn', 'attn_layer')


def _refuse_reserved(kwargs: dict[str, Any]) -> None:
    """Refuse the timm arguments vispe sets; ``dynamic_img_size=True`` (what vispe models always are) is taken
    out of ``kwargs``, ``False`` is refused."""
    for reserved in RESERVED_TIMM_ARGS:
        if reserved in kwargs:
            raise TypeError(f'vispe sets {reserved!r} itself; choose the position encoding with encoding=...')
    if not kwargs.pop('dynamic_img_size', True):
        raise ValueError('dynamic_img_size=False: vispe models always take any image size divisible by the patch '
                         'size (their encodings follow the grid); leave dynamic_img_size out or pass True.')


def image_positions(images: torch.Tensor, in_chans: int, reference: torch.Tensor | None, nonfinite_inputs: str,
                    patch_size: tuple[int, int], dynamic_img_pad: bool, num_prefix_tokens: int) -> Positions:
    """Check an image batch (:func:`~vispe.models.inputs.check_image_batch`: rank, channels, size, device, dtype,
    non-finite pixels by ``nonfinite_inputs``; ``reference`` is the parameter whose device and dtype the images
    need) and return the :class:`Positions` of its patch grid.

    A leaf for timm's torch.fx feature extraction (``register_notrace_function``): the grid depends on the
    input's shape, which symbolic tracing does not know."""
    check_image_batch(images, in_chans, reference, nonfinite_inputs,
                      channels_fix=', or build the model with in_chans={channels}')
    grid = feature_grid_size(images.shape[-2:], patch_size, dynamic_img_pad)
    return Positions(grid, num_prefix_tokens, patch_size=tuple(patch_size), device=images.device)


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
    patch size (or any size with ``dynamic_img_pad=True``).

    Args:
        encoding: an encoding config, instance or list (see :func:`vispe.build_encoding`);
            default ``dict(type='LearnedAPE')``, timm's own.
        nonfinite_inputs: what a batch with NaN or ±inf pixels does: 'raise' (ValueError), 'warn'
            (RuntimeWarning) or 'ignore' (no check). Also a plain attribute.
        **kwargs: timm ``VisionTransformer`` arguments except ``pos_embed``, ``block_fn`` and
            ``attn_layer``, which vispe sets; ``dynamic_img_size`` may be True (vispe models always are).

    Shapes: images (B, C, H, W) -> logits (B, num_classes); ``forward_features`` -> (B, prefix + h·w, C).
    """

    encoding: PositionEncoding
    nonfinite_inputs: str = 'raise'

    def __init__(self, *args: Any, encoding: EncodingConfig | None = None, nonfinite_inputs: str = 'raise',
                 **kwargs: Any) -> None:
        _refuse_reserved(kwargs)
        check_nonfinite_option(nonfinite_inputs)
        super().__init__(*args, pos_embed='none', block_fn=Block, attn_layer=Attention, dynamic_img_size=True,
                         **kwargs)
        if not isinstance(self.patch_drop, nn.Identity):
            raise ValueError('patch_drop_rate > 0 is not supported: dropped patches would leave the grid that '
                             'relative and rotary encodings index. Use drop_path_rate or mixup instead.')
        self.nonfinite_inputs = nonfinite_inputs
        self.attach_encoding(DEFAULT_ENCODING if encoding is None else encoding)

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
        )

    def attach_encoding(self, encoding: EncodingConfig, timm_pos_embed: nn.Parameter | None = None) -> None:
        """Build ``encoding`` for this model and make it the model's encoding.

        Args:
            encoding: config, instance or list.
            timm_pos_embed: a timm ``pos_embed`` parameter for a :class:`LearnedAPE` built from a
                config to take over (weights kept).
        """
        built = build_encoding(encoding, **self.encoding_context())
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
             nonfinite_inputs: str | None = None) -> VisionTransformer:
    """Put an encoding into an existing timm ``VisionTransformer``, in place, keeping its weights.

    The instance becomes a :class:`VisionTransformer` (a subclass of timm's, so ``isinstance``
    checks still hold), its blocks vispe :class:`Block` and its attentions vispe :class:`Attention`;
    no parameter is created or copied except the new encoding's. ``encoding`` says everything the
    model will have: a learned APE it had is kept only if ``encoding`` includes
    ``dict(type='LearnedAPE')`` (which then takes the timm parameter over), e.g.
    ``encoding=['LearnedAPE', dict(type='RoPEAxial')]``.

    Args:
        model: a timm ``VisionTransformer`` with standard ``Block``/``Attention`` layers.
        encoding: config, instance or list; default ``LearnedAPE``.
        nonfinite_inputs: 'raise', 'warn' or 'ignore' for NaN/inf pixels (see :class:`VisionTransformer`);
            None keeps the setting of a vispe model ('raise' for a timm model).

    Returns:
        The same object, converted.
    """
    encoding = DEFAULT_ENCODING if encoding is None else encoding
    if nonfinite_inputs is not None:
        check_nonfinite_option(nonfinite_inputs)
    if isinstance(model, VisionTransformer):
        current = next((m for m in _encoding_members(model.encoding) if isinstance(m, LearnedAPE)), None)
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
        raise ValueError('patch_drop_rate > 0 is not supported by vispe ViTs; rebuild with patch_drop_rate=0.')
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


def _check_architecture_overrides(kwargs: dict[str, Any]) -> None:
    """Sizes given to ``create_vit`` that timm would turn into a division by zero or an empty model."""
    for name in ('patch_size', 'img_size', 'depth', 'num_heads', 'embed_dim'):
        value = kwargs.get(name)
        values = value if isinstance(value, (tuple, list)) else [value]
        if value is not None and not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
            raise ValueError(f'create_vit: {name} must be a whole number of at least 1 (or a pair of them for sizes); '
                             f'got {value!r}.')
    embed_dim, num_heads = kwargs.get('embed_dim'), kwargs.get('num_heads')
    if embed_dim is not None and num_heads is not None and embed_dim % num_heads:
        nearest = min((d for d in range(1, embed_dim + 1) if embed_dim % d == 0), key=lambda d: abs(d - num_heads))
        raise ValueError(f'create_vit: embed_dim {embed_dim} is not divisible by num_heads {num_heads}; choose a '
                         f'head count that divides it (e.g. {nearest}).')
    image, patch = kwargs.get('img_size'), kwargs.get('patch_size')
    if image is not None and patch is not None:
        image, patch = to_2tuple(image), to_2tuple(patch)
        if image[0] < patch[0] or image[1] < patch[1]:
            raise ValueError(f'create_vit: img_size {image} is smaller than one patch {patch}; the training size '
                             f'must hold at least one patch per side.')


def create_vit(
        model_name: str,
        encoding: EncodingConfig | None = None,
        pretrained: bool = False,
        nonfinite_inputs: str = 'raise',
        **kwargs: Any,
) -> VisionTransformer:
    """Build a timm ViT architecture by name with any vispe encoding.

    The architecture (embed_dim, depth, heads, patch size, ...) comes from timm's own model
    definition; timm's keyword arguments (``num_classes``, ``img_size``, ``drop_path_rate``,
    ``class_token``, ``reg_tokens``, ``global_pool``, ``pretrained_cfg_overlay`` ...) pass through.
    With ``dict(type='LearnedAPE')`` the model is timm's ViT: the same weights give the same logits.

    Args:
        model_name: a timm ``VisionTransformer`` name, e.g. ``'vit_small_patch16_224'``.
        encoding: config, instance or list; default ``LearnedAPE``.
        pretrained: load timm's pretrained weights (needs the weights locally or a hub connection).
        nonfinite_inputs: 'raise', 'warn' or 'ignore' for NaN/inf pixels (see :class:`VisionTransformer`);
            vispe's option, not passed to timm.

    Example:
        >>> vit = create_vit('vit_small_patch16_224', encoding=dict(type='SinCos2D'), num_classes=10)
        >>> vit(torch.randn(2, 3, 384, 320)).shape
        torch.Size([2, 10])
    """
    encoding = DEFAULT_ENCODING if encoding is None else encoding
    _refuse_reserved(kwargs)
    _check_architecture_overrides(kwargs)
    check_nonfinite_option(nonfinite_inputs)
    ape_cfg = _ape_config(encoding)
    timm_kwargs: dict[str, Any] = dict(kwargs, dynamic_img_size=True)
    if not pretrained:
        # pretrained weights need the architecture's own pos_embed to load; retrofit then keeps or drops it
        timm_kwargs['pos_embed'] = 'learn' if ape_cfg else 'none'
    if ape_cfg is not None and 'no_embed_class' in ape_cfg:
        timm_kwargs['no_embed_class'] = ape_cfg['no_embed_class']
    if not timm.is_model(model_name):
        close = difflib.get_close_matches(model_name, timm.list_models('vit_*'), n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ''
        raise ValueError(f'Unknown timm model {model_name!r}.{hint} List them with timm.list_models("vit_*").')
    features_only = timm_kwargs.pop('features_only', False)
    feature_cfg = {key: timm_kwargs.pop(key) for key in ('out_indices', 'feature_cls') if key in timm_kwargs}
    model = retrofit(timm.create_model(model_name, pretrained=pretrained, **timm_kwargs), encoding,
                     nonfinite_inputs=nonfinite_inputs)
    return feature_extractor(model, **feature_cfg) if features_only else model


def feature_extractor(model: VisionTransformer, out_indices: int | Sequence[int] = 3,
                      feature_cls: str = 'getter') -> nn.Module:
    """timm's ``features_only`` wrapper of a ViT: ``FeatureGetterNet`` over ``forward_intermediates`` (as timm wraps
    its own ViTs), returning the feature maps (B, C, h, w) of the blocks ``out_indices`` (an int n: the last n).

    Raises:
        ValueError: a ``feature_cls`` other than timm's ViT extractor ('getter').
    """
    if feature_cls != 'getter':
        raise ValueError(f"feature_cls={feature_cls!r}: vispe ViTs give features as timm's ViTs do, through "
                         f"forward_intermediates (feature_cls='getter', the default); for other layers use "
                         f"timm.models.create_feature_extractor (torch.fx) on the model built without features_only.")
    extractor = FeatureGetterNet(model, out_indices=out_indices)
    extractor.pretrained_cfg = pretrained_cfg_for_features(model.pretrained_cfg)
    extractor.default_cfg = extractor.pretrained_cfg
    return extractor


MODELS.register_module(name='TimmViT', module=create_vit)

