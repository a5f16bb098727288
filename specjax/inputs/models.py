"""The `Model` pytree the kernels read, and its builders: target, draft model, EAGLE/MTP head.

A `Model` holds per-replica totals (the kernels divide by the tensor-parallel degree):
parameters by dtype group, MoE shape, attention shape and KV-cache layout. Every leaf is
continuous, so sweeps vmap over expert count, top-r, expert size or window, and autodiff
gives sensitivities to each. `Model.zeros()` is the "no draft model" drafter (n-gram, ratio).
"""

import functools
import json
import pathlib

import numpy as np

from . import config as _config
from .dtypes import canonical, nbytes
from ..errors import path_exists, unknown_name

# `Model` comes from the module's __getattr__ (imported with JAX on first use)
__all__ = ["Model", "target", "eagle_head", "dflash_head", "mtp_head", "self_draft",  # noqa: F822
           "load_architecture", "preset_slugs", "preset_info"]

PRESET_DIR = pathlib.Path(__file__).parents[1] / "presets" / "models"


def dtype_names(arch, weight_dtype=None, expert_dtype=None, kv_dtype=None):
    """(weight, expert, head, KV) dtype names a build uses: the flags where given, else the config's
    (an FP8 checkpoint keeps a bf16 KV cache unless --kv-dtype says otherwise)."""
    w = canonical(weight_dtype, "weight_dtype") if weight_dtype else arch.weight_dtype
    e = canonical(expert_dtype, "expert_dtype") if expert_dtype else (w if weight_dtype else arch.expert_dtype)
    h = w if weight_dtype else arch.head_dtype
    kv = canonical(kv_dtype, "kv_dtype") if kv_dtype else ("bf16" if arch.weight_dtype in ("fp8",) else
                                                           arch.weight_dtype)
    return w, e, h, kv


def _dtypes(arch, weight_dtype, expert_dtype, kv_dtype):
    return tuple(nbytes(d) for d in dtype_names(arch, weight_dtype, expert_dtype, kv_dtype))


def _build(arch, *, dtype, **kw):
    """The `Model` of `_leaves(arch, **kw)`, each leaf a host array of `dtype` (no device dispatch)."""
    from ..cost.trees import Model

    return Model(**{k: np.asarray(float(v), dtype) for k, v in _leaves(arch, **kw).items()})


def _leaves(arch, *, p_dense, p_head, head_resident, p_stored, n_layers, n_full, n_window, n_moe,
            weight_dtype, expert_dtype, kv_dtype, p_attn=None, projection=False):
    """Every `Model` leaf of a build by name, as Python numbers (JAX-free: `specjax presets` counts from them)."""
    b_w, b_e, b_h, b_kv = _dtypes(arch, weight_dtype, expert_dtype, kv_dtype)
    vals = dict(
        d_model=arch.d_model, n_layers=n_layers, p_dense=p_dense, b_dense=b_w, p_head=p_head, b_head=b_h,
        head_resident=head_resident, p_stored=p_stored, n_moe_layers=n_moe,
        n_experts=arch.n_experts if n_moe else 0, top_k=arch.top_k if n_moe else 0,
        p_expert=arch.p_expert if n_moe else 0, b_expert=b_e, n_full_layers=n_full,
        n_window_layers=n_window, window=arch.window, attn_flops_per_ctx=arch.attn_flops_per_ctx,
        kv_elems_per_tok=arch.kv_elems_per_tok, b_kv=b_kv, kv_heads=arch.kv_split,
        p_attn=n_layers * arch.p_attn_layer if p_attn is None else p_attn, weights_resident=1.0,
        n_kernels=arch.kernels(n_layers, n_moe, projection))
    return vals


def target(arch, *, weight_dtype=None, expert_dtype=None, kv_dtype=None, dtype=np.float32):
    """A full model (target or separate draft model) from its `Architecture`."""
    return _build(arch, dtype=dtype, **_target(arch, weight_dtype, expert_dtype, kv_dtype))


def _target(arch, weight_dtype=None, expert_dtype=None, kv_dtype=None):
    return dict(p_dense=arch.p_dense, p_head=arch.p_head, head_resident=1.0, p_stored=arch.p_embed + arch.p_stored_only,
                n_layers=arch.n_layers, n_full=arch.n_full_layers, n_window=arch.n_window_layers,
                n_moe=arch.n_moe_layers, weight_dtype=weight_dtype, expert_dtype=expert_dtype, kv_dtype=kv_dtype)


def eagle_head(head, target_arch, *, weight_dtype=None, kv_dtype=None, dtype=np.float32):
    """An EAGLE head: fc + one decoder layer (+ own draft-vocab LM head for EAGLE-3).

    EAGLE-1 heads reuse the target's LM head every draft pass (read, not stored);
    EAGLE-3 heads (config has `draft_vocab_size`) read their own smaller head. Both share
    the target's embedding.
    """
    return _build(head, dtype=dtype, **_eagle_head(head, target_arch, weight_dtype, kv_dtype))


def _eagle_head(head, target_arch, weight_dtype=None, kv_dtype=None):
    own_head = head.eagle_version == 3
    p_head = head.draft_vocab * head.d_model if own_head else target_arch.vocab * target_arch.d_model
    return dict(p_dense=head.p_dense, p_head=p_head, head_resident=float(own_head), p_stored=0.0,
                n_layers=head.n_layers, n_full=head.n_layers, n_window=0, n_moe=head.n_moe_layers,
                weight_dtype=weight_dtype, expert_dtype=None, kv_dtype=kv_dtype, projection=bool(head.p_extra_read))


def preset_params(arch):
    """(total, active) params of a model preset as `specjax presets` lists them: of the model a target build
    gives, or of an EAGLE head on its own target, from the same leaves in float32 as the pytree's
    (`cost.params`) without importing JAX."""
    import types

    from ..cost import params

    kw = _eagle_head(arch, arch) if arch.eagle_version else _target(arch)
    m = types.SimpleNamespace(**{k: np.float32(v) for k, v in _leaves(arch, **kw).items()})
    return float(params.total_params(m)), float(params.active_params(m))


def dflash_head(head, target_arch, *, weight_dtype=None, kv_dtype=None, dtype=np.float32):
    """A DFlash block-diffusion drafter (z-lab `DFlashDraftModel`): fc (the target's hidden states at
    `dflash_features` layers, concatenated -> d) + its own decoder layers, with a KV cache of its own; it
    embeds the block with the target's embedding and reads the target's LM head (read every pass, not
    stored), as the z-lab and vLLM implementations do. A parallel drafter (docs/model.md §5.1)."""
    p_head = target_arch.vocab * target_arch.d_model
    return _build(head, p_dense=head.p_dense, p_head=p_head, head_resident=0.0, p_stored=0.0,
                  n_layers=head.n_layers, n_full=head.n_full_layers, n_window=head.n_window_layers,
                  n_moe=head.n_moe_layers, weight_dtype=weight_dtype, expert_dtype=None, kv_dtype=kv_dtype,
                  dtype=dtype, projection=True)


def mtp_head(arch, *, weight_dtype=None, expert_dtype=None, kv_dtype=None, dtype=np.float32):
    """The target's own MTP layer (DeepSeek-V3, GLM-4.5): eh_proj + one decoder layer of the
    target's last kind (MoE if the target has MoE layers) + the target's LM head (shared)."""
    moe = 1 if arch.n_moe_layers else 0
    router = arch.d_model * arch.n_experts if moe else 0
    ffn = arch.ffn_params(arch.shared_width) + router if moe else arch.ffn_params(arch.dense_ffn_width)
    p_dense = 2 * arch.d_model * arch.d_model + arch.p_attn_layer + ffn
    return _build(arch, p_dense=p_dense, p_head=arch.p_head, head_resident=0.0, p_stored=0.0, n_layers=1,
                  n_full=1, n_window=0, n_moe=moe, weight_dtype=weight_dtype, expert_dtype=expert_dtype,
                  kv_dtype=kv_dtype, dtype=dtype, projection=True)


def self_draft(arch, *, weight_dtype=None, expert_dtype=None, kv_dtype=None, dtype=np.float32):
    """Self-speculation (MagicDec): the target's own weights as the drafter, read by every draft pass but
    not stored twice (`weights_resident` 0); its bounded KV cache is `Decode.draft_kv_budget`."""
    m = target(arch, weight_dtype=weight_dtype, expert_dtype=expert_dtype, kv_dtype=kv_dtype, dtype=dtype)
    return m.replace(weights_resident=np.zeros_like(m.weights_resident))


@functools.cache
def preset_slugs():
    """Slugs of the packaged model presets (package files: listed once per process)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


def load_architecture(name_or_path):
    """Load a preset by slug, or a user's config.json by path, as an `Architecture`."""
    s = str(name_or_path)
    path = pathlib.Path(s)
    if path.suffix == ".json" or path_exists(path):
        return _config.from_dict(_config.load_json(path), name=path.stem, source=s)
    if s not in preset_slugs():
        raise unknown_name("model", s, preset_slugs())
    return _preset_architecture(s)


@functools.lru_cache(maxsize=None)
def _preset_architecture(slug):
    """A packaged preset's `Architecture` (frozen; read once per process)."""
    cfg = json.loads((PRESET_DIR / f"{slug}.json").read_text())
    return _config.from_dict(cfg, name=slug, source=f"preset {slug}")


def __getattr__(name):  # `models.Model`: the pytree, imported (with JAX) on first use
    if name == "Model":
        from ..cost.trees import Model

        return Model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def preset_info(slug):
    """The provenance block (`_specjax`) stored in a preset's config.json."""
    return json.loads((PRESET_DIR / f"{slug}.json").read_text()).get("_specjax", {})
