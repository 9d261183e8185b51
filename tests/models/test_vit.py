"""vispe's ViT: timm parity, any resolution, composition, retrofit, clear errors."""
from __future__ import annotations

import copy

import pytest
import timm
import torch

import vispe
from vispe.encodings import EncodingStack, LearnedAPE, SinCos2D

from ..helpers import max_diff, tiny_vit


@pytest.fixture(scope='module')
def timm_vit_s() -> torch.nn.Module:
    torch.manual_seed(1)
    return timm.create_model('vit_small_patch16_224', dynamic_img_size=True, num_classes=10).eval()


@pytest.mark.parametrize('size', [(224, 224), (320, 256)])
def test_learned_ape_matches_timm(timm_vit_s, size) -> None:
    ours = vispe.create_vit('vit_small_patch16_224', encoding=dict(type='LearnedAPE'), num_classes=10).eval()
    ours.load_state_dict(timm_vit_s.state_dict())
    images = torch.randn(2, 3, *size)
    with torch.no_grad():
        assert max_diff(ours(images), timm_vit_s(images)) <= 1e-5


def test_is_causal_and_output_dict_match_timm(timm_vit_s) -> None:
    """timm 1.0.31's ``is_causal`` (forward, forward_features, forward_intermediates) and ``output_dict``."""
    ours = vispe.create_vit('vit_small_patch16_224', encoding=dict(type='LearnedAPE'), num_classes=10).eval()
    ours.load_state_dict(timm_vit_s.state_dict())
    images = torch.randn(2, 3, 64, 48)
    with torch.no_grad():
        assert max_diff(ours(images, is_causal=True), timm_vit_s(images, is_causal=True)) <= 1e-5
        assert max_diff(ours(images, is_causal=True), ours(images)) > 1e-3
        theirs = timm_vit_s.forward_intermediates(images, indices=2, return_prefix_tokens=True, output_dict=True,
                                                  is_causal=True)
        mine = ours.forward_intermediates(images, indices=2, return_prefix_tokens=True, output_dict=True,
                                          is_causal=True)
        assert mine.keys() == theirs.keys() == {'image_intermediates', 'image_intermediates_prefix', 'image_features'}
        assert max_diff(mine['image_features'], theirs['image_features']) <= 1e-5
        for key in ('image_intermediates', 'image_intermediates_prefix'):
            assert len(mine[key]) == len(theirs[key]) == 2
            assert all(max_diff(a, b) <= 1e-5 for a, b in zip(mine[key], theirs[key]))
        only = ours.forward_intermediates(images, indices=1, output_dict=True, intermediates_only=True)
        assert only.keys() == {'image_intermediates'}


def test_is_causal_joins_an_attention_mask_and_encoding_biases() -> None:
    """With a mask (bool or additive) or a bias encoding, is_causal is the causal mask combined with them."""
    vit = tiny_vit('ALiBi2D')
    images = torch.randn(1, 3, 16, 12)
    tokens = 1 + 4 * 3
    keep = torch.rand(tokens, tokens) > 0.3
    keep.fill_diagonal_(True)
    causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()
    with torch.no_grad():
        assert max_diff(vit(images, attn_mask=keep, is_causal=True), vit(images, attn_mask=keep & causal)) == 0.0
        additive = torch.zeros(tokens, tokens).masked_fill(~keep, float('-inf'))
        assert max_diff(vit(images, attn_mask=additive, is_causal=True), vit(images, attn_mask=keep & causal)) <= 1e-6
        assert max_diff(vit(images, is_causal=True), vit(images, attn_mask=causal)) == 0.0


def test_nope_matches_timm_without_pos_embed() -> None:
    theirs = timm.create_model('vit_small_patch16_224', dynamic_img_size=True, num_classes=10,
                               pos_embed='none').eval()
    ours = vispe.create_vit('vit_small_patch16_224', encoding='NoPE', num_classes=10).eval()
    ours.load_state_dict(theirs.state_dict())
    images = torch.randn(2, 3, 320, 256)
    with torch.no_grad():
        assert max_diff(ours(images), theirs(images)) <= 1e-5


def test_same_seed_gives_timms_weights_and_names() -> None:
    torch.manual_seed(3)
    theirs = timm.create_model('vit_tiny_patch16_224', num_classes=5, reg_tokens=2, no_embed_class=True)
    torch.manual_seed(3)
    ours = vispe.create_vit('vit_tiny_patch16_224', num_classes=5, reg_tokens=2,
                            encoding=dict(type='LearnedAPE', no_embed_class=True))
    theirs_sd, ours_sd = theirs.state_dict(), ours.state_dict()
    assert set(theirs_sd) == set(ours_sd)
    assert all(torch.equal(theirs_sd[key], ours_sd[key]) for key in theirs_sd)


@pytest.mark.parametrize('encoding', ['NoPE', 'LearnedAPE', 'SinCos2D', 'FourierFeatures'])
@pytest.mark.parametrize('size', [(56, 56), (112, 112), (224, 224), (36, 92), (4, 80)])
def test_any_size_divisible_by_the_patch(encoding, size) -> None:
    vit = tiny_vit(encoding)
    with torch.no_grad():
        features = vit.forward_features(torch.randn(2, 3, *size))
    assert features.shape == (2, 1 + (size[0] // 4) * (size[1] // 4), 64)
    assert torch.isfinite(features).all()


def test_issue_example_at_224_and_384x320() -> None:
    vit = vispe.create_vit('vit_small_patch16_224', encoding=dict(type='SinCos2D'), num_classes=10).eval()
    with torch.no_grad():
        assert vit(torch.randn(2, 3, 224, 224)).shape == (2, 10)
        assert vit(torch.randn(2, 3, 384, 320)).shape == (2, 10)


def test_encodings_compose() -> None:
    vit = tiny_vit([dict(type='LearnedAPE'), dict(type='SinCos2D')])
    assert isinstance(vit.encoding, EncodingStack)
    ape, sincos = vit.encoding.encodings
    images = torch.randn(1, 3, 56, 56)
    alone = tiny_vit(ape)
    alone.load_state_dict(vit.state_dict())
    pos = vit.positions(images)
    tokens = torch.zeros(1, 197, 64)
    assert torch.allclose(vit.encoding.embed(tokens, pos), sincos.embed(ape.embed(tokens, pos), pos))
    assert 'pos_embed' in vit.state_dict()
    with torch.no_grad():
        assert max_diff(vit(images), alone(images)) > 1e-4


def test_two_learned_apes_cannot_share_the_timm_name() -> None:
    with pytest.raises(ValueError, match="save a parameter as 'pos_embed'"):
        tiny_vit(['LearnedAPE', 'LearnedAPE'])


def test_no_weight_decay_names_are_parameters() -> None:
    vit = tiny_vit(['LearnedAPE', 'SinCos2D'])
    names = dict(vit.named_parameters())
    no_decay = vit.no_weight_decay()
    assert 'encoding.encodings.0.pos_embed' in no_decay
    assert {name for name in no_decay if name in names} == {'cls_token', 'encoding.encodings.0.pos_embed'}


def test_retrofit_keeps_weights_and_outputs() -> None:
    theirs = timm.create_model('vit_tiny_patch16_224', img_size=64, depth=2, num_classes=3).eval()
    reference = copy.deepcopy(theirs)
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        expected = reference(images)
    converted = vispe.retrofit(theirs, encoding='LearnedAPE')
    assert converted is theirs and isinstance(converted, vispe.VisionTransformer)
    assert isinstance(converted, timm.models.VisionTransformer)
    assert converted.encoding.pos_embed is not None
    with torch.no_grad():
        assert max_diff(converted(images), expected) == 0.0
        assert converted(torch.randn(1, 3, 96, 48)).shape == (1, 3)
    assert set(converted.state_dict()) == set(reference.state_dict())


def test_retrofit_with_a_new_encoding_drops_the_ape_and_keeps_blocks() -> None:
    theirs = timm.create_model('vit_tiny_patch16_224', img_size=64, depth=2, num_classes=3).eval()
    qkv = theirs.blocks[0].attn.qkv.weight
    with pytest.warns(UserWarning, match='Pass encoding=\\["LearnedAPE", ...\\] to keep it'):
        converted = vispe.retrofit(theirs, encoding=dict(type='SinCos2D'))
    assert converted.blocks[0].attn.qkv.weight is qkv
    assert isinstance(converted.encoding, SinCos2D) and 'pos_embed' not in converted.state_dict()


def test_retrofit_refuses_models_it_cannot_convert() -> None:
    with pytest.raises(TypeError, match='timm VisionTransformer'):
        vispe.retrofit(torch.nn.Linear(2, 2))
    eva = timm.create_model('vit_small_patch16_rope_224', img_size=32, depth=1)
    with pytest.raises(TypeError, match='Eva'):
        vispe.retrofit(eva)


def test_bad_inputs_name_the_fix() -> None:
    vit = tiny_vit('SinCos2D')
    with pytest.raises(ValueError, match=r'height 57 is not a multiple of the patch size 4 \(nearest: 56 or 60\)'):
        vit(torch.randn(1, 3, 57, 56))
    with pytest.raises(ValueError, match='dynamic_img_pad=True'):
        vit(torch.randn(1, 3, 56, 58))
    with pytest.raises(ValueError, match='Expected 3 channels'):
        vit(torch.randn(1, 1, 56, 56))
    with pytest.raises(ValueError, match='x.unsqueeze'):
        vit(torch.randn(3, 56, 56))
    with pytest.raises(ValueError, match="Unknown timm model 'vit_tiny_patch16_22'"):
        vispe.create_vit('vit_tiny_patch16_22')
    with pytest.raises(TypeError, match='encoding='):
        vispe.create_vit('vit_tiny_patch16_224', pos_embed='none')


def test_dynamic_img_size_true_is_accepted_and_false_refused() -> None:
    """timm users pass dynamic_img_size=True out of habit; vispe models always are, so True is a no-op."""
    vit = vispe.create_vit('vit_tiny_patch16_224', encoding='RoPEAxial', dynamic_img_size=True, num_classes=3,
                           depth=1, img_size=32)
    assert vit.dynamic_img_size and vit(torch.randn(1, 3, 48, 32)).shape == (1, 3)
    direct = vispe.VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=2,
                                     dynamic_img_size=True)
    assert direct(torch.randn(1, 3, 40, 32)).shape == (1, 2)
    for build in (lambda: vispe.create_vit('vit_tiny_patch16_224', dynamic_img_size=False),
                  lambda: vispe.VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2,
                                                  dynamic_img_size=False)):
        with pytest.raises(ValueError, match='dynamic_img_size=False: vispe models always take any image size'):
            build()


def test_dynamic_img_pad_accepts_any_size() -> None:
    vit = tiny_vit('SinCos2D', dynamic_img_pad=True)
    with torch.no_grad():
        assert vit.forward_features(torch.randn(1, 3, 57, 50)).shape == (1, 1 + 15 * 13, 64)


def test_forward_intermediates_and_grad_checkpointing() -> None:
    vit = tiny_vit('LearnedAPE')
    images = torch.randn(2, 3, 56, 40)
    final, intermediates = vit.forward_intermediates(images)
    assert [y.shape for y in intermediates] == [(2, 64, 14, 10)] * 2
    assert max_diff(final, vit.forward_features(images)) <= 1e-6
    vit.train()
    vit.set_grad_checkpointing(True)
    loss = vit(images).sum()
    loss.backward()
    assert vit.encoding.pos_embed.grad is not None


def test_built_from_config_through_registry(repo_root) -> None:
    from mmengine.config import Config
    cfg = Config.fromfile(str(repo_root / 'configs' / '_base_' / 'models' / 'vit-s16.py'))
    cfg.model.encoding = dict(type='FourierFeatures')
    model = vispe.MODELS.build(cfg.model)
    assert isinstance(model, vispe.VisionTransformer) and len(model.blocks) == 12


def test_vispe_vision_transformer_direct_construction() -> None:
    vit = vispe.VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=2,
                                  encoding=dict(type='LearnedAPE'))
    assert isinstance(vit.encoding, LearnedAPE) and vit.encoding.grid_size == (4, 4)
    assert vit(torch.randn(1, 3, 64, 32)).shape == (1, 2)
    with pytest.raises(ValueError, match='patch_drop_rate'):
        vispe.VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, patch_drop_rate=0.1)


def test_pretrained_weights_from_a_local_file(tmp_path) -> None:
    arch = dict(img_size=56, patch_size=4, embed_dim=64, depth=2, num_heads=4, num_classes=10)
    theirs = timm.create_model('vit_tiny_patch16_224', **arch).eval()
    path = tmp_path / 'weights.pth'
    torch.save(theirs.state_dict(), path)
    overlay = dict(file=str(path), num_classes=10)
    with_ape = vispe.create_vit('vit_tiny_patch16_224', pretrained=True, pretrained_cfg_overlay=overlay,
                                **arch).eval()
    images = torch.randn(1, 3, 56, 56)
    with torch.no_grad():
        assert max_diff(with_ape(images), theirs(images)) <= 1e-6
    with pytest.warns(UserWarning, match='dropped the model.s learned pos_embed'):
        sincos = vispe.create_vit('vit_tiny_patch16_224', encoding='SinCos2D', pretrained=True,
                                  pretrained_cfg_overlay=overlay, **arch)
    assert torch.equal(sincos.blocks[1].mlp.fc1.weight, theirs.blocks[1].mlp.fc1.weight)
    assert 'pos_embed' not in sincos.state_dict()


def test_retrofit_of_a_vispe_model_keeps_its_ape() -> None:
    vit = tiny_vit('LearnedAPE')
    table = vit.encoding.pos_embed
    vispe.retrofit(vit, encoding=['LearnedAPE', 'SinCos2D'])
    assert vit.encoding.encodings[0].pos_embed is table


def test_norm_eps_and_a_two_layer_head() -> None:
    """create_vit's norm_eps sets every LayerNorm's eps; head_hidden_dim makes the head fc2(act(fc1(x)))."""
    model = tiny_vit(norm_eps=1e-5, head_hidden_dim=24, head_act='relu')
    norms = [module for module in model.modules() if isinstance(module, torch.nn.LayerNorm)]
    assert norms and {norm.eps for norm in norms} == {1e-5}
    assert {norm.eps for norm in tiny_vit().modules() if isinstance(norm, torch.nn.LayerNorm)} == {1e-6}
    assert tuple(model.head.fc1.weight.shape) == (24, 64) and tuple(model.head.fc2.weight.shape) == (10, 24)
    images = torch.randn(2, 3, 32, 32)
    features = model.forward_head(model.forward_features(images), pre_logits=True)
    expected = model.head.fc2(torch.relu(model.head.fc1(features)))
    assert max_diff(model(images), expected) == 0
    classifier = vispe.MODELS.build(dict(type='ImageClassifier', head_bias_init=-6.9,
                                         backbone=dict(type='TimmViT', model_name='vit_tiny_patch16_224', img_size=32,
                                                       patch_size=8, embed_dim=64, depth=1, num_heads=2,
                                                       num_classes=10, head_hidden_dim=16)))
    assert torch.equal(classifier.backbone.head.fc2.bias, torch.full((10,), -6.9))
    values = torch.linspace(-3, 3, 7)
    assert torch.equal(classifier.backbone.head.act(values), torch.tanh(values))


@pytest.mark.parametrize('overrides, message', [
    (dict(norm_eps=0.0), 'norm_eps must be > 0'),
    (dict(norm_eps=1e-5, norm_layer='layernorm'), 'give norm_eps .* or norm_layer'),
    (dict(head_hidden_dim=0), 'head_hidden_dim must be a whole number'),
    (dict(head_hidden_dim=8, head_act='nope'), "head_act 'nope' is not a timm activation"),
    (dict(head_hidden_dim=8, num_classes=0), 'needs num_classes >= 1'),
])
def test_norm_eps_and_head_options_refuse_bad_values(overrides, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tiny_vit(**overrides)
