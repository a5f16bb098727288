"""Parameter counts, KV sizes and layer layouts of the presets, checked against hand counts."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from specjax.inputs import hardware, models
from specjax.errors import SpecError

# (slug, total B, active B, rel tol): official numbers (facts/, model cards). Active excludes
# the embedding lookup (DeepSeek README_WEIGHTS 36.6B; Mixtral's 12.9B includes 0.13B embedding).
OFFICIAL = [
    ("gpt-oss-120b", 116.83, 5.13, 0.005),
    ("gpt-oss-20b", 20.91, 3.61, 0.005),
    ("llama-3-70b", 70.6, 69.5, 0.002),
    ("deepseek-v3", 671.0, 36.6, 0.002),
    ("mixtral-8x7b", 46.7, 12.9, 0.02),
    ("mixtral-8x22b", 140.6, 39.0, 0.01),
    ("qwen3-235b-a22b", 235.1, 21.6, 0.01),
    ("qwen3-30b-a3b", 30.5, 3.04, 0.01),
    ("glm-4.5-air", 106.85, 12.80, 0.002),
    ("llama-3.1-8b", 8.03, 7.50, 0.002),
    ("llama-3.2-1b", 1.236, 1.236, 0.002),
    ("qwen2-57b-a14b", 57.41, 13.70, 0.002),
]


@pytest.mark.parametrize("slug,total,active,tol", OFFICIAL)
def test_param_counts_match_official(slug, total, active, tol):
    m = models.target(models.load_architecture(slug))
    assert float(m.total_params) / 1e9 == pytest.approx(total, rel=tol)
    assert float(m.active_params) / 1e9 == pytest.approx(active, rel=tol)


def test_gpt_oss_120b_by_hand():
    d, h, hkv, dh, e, r, layers, vocab = 2880, 64, 8, 64, 128, 4, 36, 201088
    attn = d * h * dh * 2 + d * hkv * dh * 2
    expert = 3 * d * 2880
    router = d * e
    total = layers * (attn + e * expert + router) + 2 * vocab * d
    active = layers * (attn + r * expert + router) + vocab * d
    m = models.target(models.load_architecture("gpt-oss-120b"))
    assert float(m.total_params) == pytest.approx(total, rel=1e-6)
    assert float(m.active_params) == pytest.approx(active, rel=1e-6)
    assert total / 1e9 == pytest.approx(116.8, abs=0.05) and active / 1e9 == pytest.approx(5.13, abs=0.01)
    # mxfp4 experts (4.25 bits) and bf16 elsewhere
    assert float(m.b_expert) == 4.25 / 8 and float(m.b_dense) == 2.0 and float(m.b_head) == 2.0


def test_deepseek_mla_by_hand():
    a = models.load_architecture("deepseek-v3")
    d, h = 7168, 128
    per_layer = d * 1536 + 1536 * h * 192 + d * 576 + 512 * h * 256 + h * 128 * d
    assert a.p_attn_layer == per_layer
    assert a.kv_elems_per_tok == 576
    assert a.attn_flops_per_ctx == 2 * h * (576 + 512)  # absorbed MLA
    assert (a.n_moe_layers, a.n_dense_ffn_layers, a.shared_width) == (58, 3, 2048)
    m = models.target(a)
    assert float(m.b_dense) == 1.0 and float(m.b_head) == 2.0 and float(m.b_kv) == 2.0


# KV bytes per token (bf16), facts/FACTS.md table
@pytest.mark.parametrize("slug,kv", [("llama-3.1-70b", 327680), ("llama-3.1-8b", 131072), ("qwama-0.5b", 12288),
                                     ("gpt-oss-120b", 73728), ("deepseek-v3", 70272), ("qwen3-8b", 147456),
                                     ("glm-4.5-air", 188416)])
def test_kv_bytes_per_token(slug, kv):
    m = models.target(models.load_architecture(slug), kv_dtype="bf16")
    per_tok = float(m.kv_elems_per_tok * m.b_kv * (m.n_full_layers + m.n_window_layers))
    assert per_tok == kv


def test_layer_layouts():
    g = models.load_architecture("gpt-oss-120b")
    assert (g.n_full_layers, g.n_window_layers, g.window) == (18, 18, 128)
    mav = models.load_architecture("llama-4-maverick")
    assert (mav.n_moe_layers, mav.n_dense_ffn_layers) == (24, 24)
    scout = models.load_architecture("llama-4-scout")
    assert (scout.n_moe_layers, scout.n_window_layers, scout.window) == (48, 36, 8192)


def test_eagle_heads():
    tgt = models.load_architecture("llama-3.1-8b")
    e3 = models.eagle_head(models.load_architecture("eagle3-llama-3.1-8b"), tgt)
    # fc 3d*d + attention from 2d inputs + MLP + own 32000-token head (facts: 424.7M)
    assert float(e3.active_params) / 1e6 == pytest.approx(424.7, abs=0.1)
    assert float(e3.total_params) == float(e3.active_params) and float(e3.head_resident) == 1.0
    e1 = models.eagle_head(models.load_architecture("eagle-llama-3.1-8b"), tgt)
    assert float(e1.p_dense) / 1e6 == pytest.approx(251.7, abs=0.1)
    assert float(e1.p_head) / 1e6 == pytest.approx(525.3, abs=0.1)  # reads the target's head
    assert float(e1.total_params) / 1e6 == pytest.approx(251.7, abs=0.1)  # stores only its own


def test_mtp_head_glm():
    a = models.load_architecture("glm-4.5-air")
    m = models.mtp_head(a)
    stored = float(m.total_params)
    # facts: MTP layer (eh_proj + one MoE decoder layer) ~2.375B incl. its own norms/biases
    assert stored / 1e9 == pytest.approx(2.375, rel=0.02)
    assert float(m.n_moe_layers) == 1 and float(m.head_resident) == 0.0


def test_every_preset_loads():
    for slug in models.preset_slugs():
        m = models.target(models.load_architecture(slug))
        assert float(m.total_params) > 0 and models.preset_info(slug)["source_url"].startswith("http")
    assert len(models.preset_slugs()) >= 29
    for slug in hardware.preset_slugs():
        h = hardware.load(slug)
        assert h.flops_per_s["bf16"] > 1e12 and h.hbm_bytes > 1e9 and h.source.startswith("http")
    assert len(hardware.preset_slugs()) >= 21


def test_user_config_path_equals_preset(tmp_path):
    cfg = json.loads((models.PRESET_DIR / "mixtral-8x7b.json").read_text())
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    a, b = models.target(models.load_architecture(p)), models.target(models.load_architecture("mixtral-8x7b"))
    for k in a.field_names:
        assert float(getattr(a, k)) == float(getattr(b, k))


def test_user_hardware_toml(tmp_path):
    p = tmp_path / "mygpu.toml"
    p.write_text('name = "x"\nhbm_bytes_per_s = 2e12\nhbm_bytes = 8e10\nlink_bytes_per_s = 4e11\n'
                 'link_latency_s = 1e-6\n[flops_per_s]\nbf16 = 5e14\n')
    hw = hardware.load(str(p)).resolve("bf16", jnp.float64)
    assert float(hw.flops_per_s) == 5e14 and float(hw.flops_efficiency) == 1.0
    assert float(hw.critical_intensity) == pytest.approx(5e14 / 2e12)


@pytest.mark.parametrize("text,msg", [
    ("{", "malformed JSON"),
    ('{"hidden_size": 4096}', "missing required key 'num_hidden_layers'"),
    ('{"hidden_size": -1, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10, '
     '"intermediate_size": 8}', "hidden_size=-1"),
    ('[1, 2]', "must hold a JSON object"),
])
def test_bad_configs(tmp_path, text, msg):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(SpecError, match=msg):
        models.load_architecture(p)


def test_dtype_override():
    a = models.load_architecture("gpt-oss-120b")
    m = models.target(a, weight_dtype="fp8")
    assert float(m.b_dense) == 1.0 and float(m.b_expert) == 1.0
    m = models.target(a, expert_dtype="nvfp4", kv_dtype="fp8")
    assert float(m.b_expert) == 4.5 / 8 and float(m.b_dense) == 2.0 and float(m.b_kv) == 1.0
    with pytest.raises(SpecError, match="weight_dtype='fp7'"):
        models.target(a, weight_dtype="fp7")
    z = models.Model.zeros(jnp.float64)
    assert float(z.weight_bytes) == 0.0 and np.isclose(float(z.total_params), 0.0)


# ---- physics corrections of docs/model.md §2.4 (KV under TP, MLA), T5 cross-attention, FP8 heads -----------

def _attention_bytes(slug, tp, batch=64.0, ctx=4096.0):
    from specjax.cost.roofline import operator_costs
    from specjax.cost.trees import Deployment

    m = models.target(models.load_architecture(slug), dtype=jnp.float64)
    dep = Deployment.single(jnp.float64).replace(tp=jnp.float64(tp))
    hw = hardware.load("h200").resolve("bf16", jnp.float64)
    _, nbytes = operator_costs(hw, dep, m, jnp.float64(batch), jnp.float64(1.0), jnp.float64(ctx))
    return float(nbytes[3] + nbytes[4]), m


@pytest.mark.parametrize("slug,tp,split", [("llama-3-70b", 8, 8), ("qwen3-235b-a22b", 8, 4),
                                           ("qwen3-235b-a22b", 2, 2), ("deepseek-v3", 8, 1)])
def test_kv_under_tensor_parallelism_splits_only_as_far_as_its_heads(slug, tp, split):
    """Per-GPU KV bytes = the replica's / min(tp, KV heads); MLA's latent is read whole by every rank."""
    one, m = _attention_bytes(slug, 1)
    many, _ = _attention_bytes(slug, tp)
    assert many == pytest.approx(one / split, rel=1e-12)
    assert float(m.kv_split(jnp.float64(tp))) == split
    # by hand for one layer kind: B (L + q) kv_tok x layers / split
    kv_tok = float(m.kv_elems_per_tok * m.b_kv)
    layers = float(m.n_full_layers + m.n_window_layers)
    if float(m.n_window_layers) == 0:
        assert many == pytest.approx(layers * 64 * (4096 + 1) * kv_tok / split, rel=1e-12)


def test_deepseek_v3_mtp_on_8_b200_memory_with_the_latent_replicated():
    """The issue's numbers: DeepSeek-V3 + MTP, 8 x B200, context 8k, fp8 KV: every GPU holds the whole
    latent, so about 261 sequences fit (not 2,089), and T_target at batch 256 is ~21.9 ms (not 13.6)."""
    from specjax import api
    from specjax.inputs.scenario import Scenario

    sc = Scenario(target="deepseek-v3", hardware="b200", drafter="mtp", tp=8, k=1, alpha=0.8, context=8192.0,
                  batch=256.0, kv_dtype="fp8", engine="roofline")
    r = api.point(sc)
    assert 255 <= r["max_batch_sd"] <= 265
    assert r["t_target_s"] * 1e3 == pytest.approx(21.9, rel=0.02)
    # by hand: weights (fp8 experts and dense, bf16 head + embedding) and 8 copies of the latent cache
    a = models.load_architecture("deepseek-v3")
    m, head = models.target(a, kv_dtype="fp8"), models.mtp_head(a, kv_dtype="fp8")
    weights = float(m.weight_bytes + head.weight_bytes)
    per_seq = 8 * 576 * 1.0 * (61 + 1) * (8192 + 2)  # latent elements x fp8 x (61 target + 1 MTP layer) x tokens
    assert r["max_batch_sd"] == int((8 * 180e9 * 0.9 - weights) // per_seq)


def test_t5_attention_flops_cover_self_and_cross_attention():
    a = models.load_architecture("t5-xxl")
    inner = 64 * 64  # T5-XXL: 64 heads x d_kv 64
    assert a.kv_elems_per_tok == 2 * 2 * inner  # self + cross caches
    assert a.attn_flops_per_ctx == 2 * 4 * inner  # and both are attended over each step


def test_fp8_checkpoints_keep_a_bf16_head_without_modules_to_not_convert():
    """DeepSeek-V3's official config.json lists no modules_to_not_convert; its LM head and embedding
    are still bf16. A config that lists unconverted modules without lm_head gets an fp8 head."""
    from specjax.inputs import config

    a = models.load_architecture("deepseek-v3")
    assert a.head_dtype == "bf16" and a.weight_dtype == "fp8"
    raw = json.loads(models.PRESET_DIR.joinpath("deepseek-v3.json").read_text())
    assert "modules_to_not_convert" not in raw["quantization_config"]
    q = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["model.layers.0"]}
    assert config.from_dict({**raw, "quantization_config": q}).head_dtype == "fp8"


def test_eagle_head_must_match_the_target_hidden_size():
    from specjax.inputs.scenario import Scenario

    with pytest.raises(SpecError, match="hidden_size 8192"):
        Scenario(engine="roofline",
                 target="llama-3-70b", hardware="h200", tp=4, drafter="eagle", draft="eagle3-llama-3.1-8b",
                 alpha=0.7).build()
    with pytest.raises(SpecError, match=r"--drafter"):
        Scenario(engine="roofline",
                 target="llama-3.1-8b", hardware="h200", draft="llama-3.2-1b", draft_cost=0.1, alpha=0.7)


def test_unit_mistakes_get_a_hint(tmp_path):
    p = tmp_path / "gpu.toml"
    p.write_text('name = "x"\nhbm_bytes_per_s = 3.2\nhbm_bytes = 8e10\nlink_bytes_per_s = 4.5e11\n'
                 "[flops_per_s]\nbf16 = 9.9e14\n")
    with pytest.raises(SpecError, match=r"hbm_bytes_per_s=3.2 .*did you mean 3.2e12\?"):
        hardware.load(str(p))
    p.write_text('name = "x"\nhbm_bytes_per_s = 3.2e12\nhbm_bytes = 80\nlink_bytes_per_s = 4.5e11\n'
                 "[flops_per_s]\nbf16 = 9.9e14\n")
    with pytest.raises(SpecError, match=r"hbm_bytes=80 .*did you mean 80e9\?"):
        hardware.load(str(p))
    p.write_text(p.read_text().replace("hbm_bytes = 80", "hbm_bytes = 8e10").replace("9.9e14", "989"))
    with pytest.raises(SpecError, match=r"flops_per_s.bf16=989 .*did you mean 989e12\?"):
        hardware.load(str(p))
