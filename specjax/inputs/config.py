"""Read a Hugging Face `config.json` into an `Architecture`: the shapes the cost model needs.

Handles dense/GQA (Llama, Qwen), MoE with shared experts and leading dense layers
(Mixtral, DeepSeek, Qwen-MoE, GLM-MoE, Llama-4, gpt-oss), sliding-window and chunked
layer types, MLA (DeepSeek), EAGLE-1/EAGLE-3 heads, DFlash block-diffusion drafters
(`DFlashDraftModel`: `block_size`, `dflash_config`), MTP layers and T5 decoders.
Parameters are weight matrices only (docs/model.md §2.8): biases, norms and sinks are ignored.
"""

import dataclasses
import pathlib

from ..errors import SpecError, field_error, parse_json, read_text


@dataclasses.dataclass(frozen=True)
class Architecture:
    """Shapes of one model, in plain Python numbers (parameters are counts of weights)."""

    name: str
    d_model: int
    n_layers: int
    vocab: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    p_attn_layer: float          # attention projection params of one layer
    attn_flops_per_ctx: float    # FLOPs per query token per cached token per layer
    kv_elems_per_tok: float      # K+V elements stored per token per layer
    n_full_layers: int
    n_window_layers: int
    window: float
    n_dense_ffn_layers: int
    dense_ffn_width: int
    n_moe_layers: int
    n_experts: int
    top_k: int
    expert_width: int
    shared_width: int            # summed width of shared experts in each MoE layer
    tied: bool
    p_extra_read: float = 0.0    # e.g. EAGLE fc, MTP eh_proj
    p_stored_only: float = 0.0   # e.g. T5 encoder, cross-attention K/V projections
    gated_ffn: bool = True
    weight_dtype: str = "bf16"
    expert_dtype: str = "bf16"
    head_dtype: str = "bf16"
    mtp_layers: int = 0
    eagle_version: int = 0
    draft_vocab: int = 0
    mla: bool = False            # multi-head latent attention: one latent per token, shared by all heads
    block_size: int = 0          # a DFlash drafter: tokens of the block it fills (anchor + block_size - 1 drafts)
    dflash_features: int = 0     # a DFlash drafter: target layers whose hidden states its fc projects (0: none)
    cross_attention: bool = False  # encoder-decoder (T5): every decoder layer also attends to the encoder
    max_context: int = 0         # longest sequence it takes (max_position_embeddings, RoPE-scaled); 0: unknown
    source: str = ""

    def kernels(self, n_layers, n_moe, extra_projection=False):
        """Kernels one pass of `n_layers` decoder layers (`n_moe` of them MoE) launches, by the pinned
        count `KERNELS`: what an engine's per-kernel overhead multiplies (docs/model.md §2.6)."""
        k = KERNELS
        attention = k["mla_attention"] if self.mla else k["attention"]
        attention += k["cross_attention"] if self.cross_attention else 0
        moe = k["moe_ffn"] + (k["shared_experts"] if self.shared_width else 0)
        return (n_layers * attention + (n_layers - n_moe) * k["dense_ffn"] + n_moe * moe + k["head"]
                + (k["projection"] if extra_projection else 0))

    @property
    def kv_split(self):
        """How many ways head-parallel TP can split the KV cache: the KV heads (docs/model.md §2.4); MLA's
        latent belongs to every head, so it is not split (1)."""
        return 1 if self.mla else self.n_kv_heads

    def ffn_params(self, width):
        """Params of one FFN of the given width (3*d*width gated, 2*d*width plain)."""
        return (3 if self.gated_ffn else 2) * self.d_model * width

    @property
    def p_expert(self):
        return self.ffn_params(self.expert_width)

    @property
    def p_head(self):
        return (self.draft_vocab or self.vocab) * self.d_model

    @property
    def p_dense(self):
        """Params read every pass at the dense dtype (all but LM head and routed experts)."""
        router = self.d_model * self.n_experts if self.n_experts else 0
        return (self.n_layers * self.p_attn_layer
                + self.n_dense_ffn_layers * self.ffn_params(self.dense_ffn_width)
                + self.n_moe_layers * (self.ffn_params(self.shared_width) + router)
                + self.p_extra_read)

    @property
    def p_embed(self):
        return 0 if self.tied else self.vocab * self.d_model


# Kernels per layer kind (a pinned count, README "Engine profiles"): what a fused decode kernel set launches.
KERNELS = dict(
    attention=5,         # input norm, QKV projection, rotary + KV-cache write, attention, output projection
    mla_attention=10,    # norm, q down, q norm, q up, kv down, kv norm, rotary + cache write, absorbed
                         # key projection, attention, value + output projection
    cross_attention=4,   # norm, query projection, attention over the encoder's cache, output projection
    dense_ffn=4,         # norm, gate/up projection, activation, down projection
    moe_ffn=7,           # norm, router, top-k, expert gate/up GEMM, activation, expert down GEMM, combine
    shared_experts=3,    # gate/up, activation, down
    head=3,              # final norm, LM head, sampling
    projection=1,        # an EAGLE fc or MTP eh_proj over concatenated hidden states
)

# Upper bounds of the counts and sizes a config.json may give: far above any real model, low enough
# that an absurd value is refused instead of hanging a loop over layers or overflowing float32.
HI = {"hidden_size": 1 << 20, "d_model": 1 << 20, "num_hidden_layers": 10_000, "num_layers": 10_000,
      "num_decoder_layers": 10_000, "num_attention_heads": 1 << 16, "num_heads": 1 << 16,
      "num_key_value_heads": 1 << 16, "head_dim": 1 << 16, "d_kv": 1 << 16, "vocab_size": 1 << 27,
      "draft_vocab_size": 1 << 27, "kv_lora_rank": 1 << 20, "q_lora_rank": 1 << 20, "qk_rope_head_dim": 1 << 16,
      "qk_nope_head_dim": 1 << 16, "v_head_dim": 1 << 16, "num_experts": 1 << 20, "num_experts_per_tok": 1 << 20,
      "n_shared_experts": 1 << 10, "num_nextn_predict_layers": 100, "sliding_window": 1 << 40,
      "attention_chunk_size": 1 << 40, "block_size": 1024}
SIZE_HI = 1 << 27  # FFN widths


def _get(cfg, key, source, default=None, required=True, lo=1, hi=None):
    """An integer count or size of the config: present (if `required`), an int (not a bool), in
    [lo, hi] (`HI`, or `SIZE_HI` for widths); None if absent and not required."""
    v = cfg.get(key, default)
    if v is None:
        if required:
            raise SpecError(f"missing required key {key!r} in {source}")
        return None
    hi = hi or HI.get(key, SIZE_HI)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise field_error(key, v, f"an integer {lo} <= {key} <= {hi}", source)
    return v


def _opt(cfg, key, source, lo=0, hi=None):
    """An optional count: absent, null or 0 mean none (0); anything else an integer in [max(lo, 1), hi]."""
    if cfg.get(key) in (None, 0) and not isinstance(cfg.get(key), bool):
        return 0
    return _get(cfg, key, source, required=False, lo=max(lo, 1), hi=hi)


def _flag(cfg, key, default, source):
    """A boolean key: a JSON true/false (a string "false" is refused, not read as true)."""
    v = cfg.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise field_error(key, v, "true or false", source)
    return v


def _layer_kinds(cfg, n, source):
    """(n_full, n_window, window) from layer_types / sliding_window / attention_chunk_size."""
    types = cfg.get("layer_types")
    window = _opt(cfg, "sliding_window", source) or _opt(cfg, "attention_chunk_size", source)
    if types is not None:
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise field_error("layer_types", types, "a list of layer type names", source)
        if len(types) != n:
            raise field_error("layer_types", f"list of {len(types)}", f"one entry per layer ({n})", source)
        windowed = sum(t in ("sliding_attention", "chunked_attention") for t in types)
        if windowed and not window:
            raise SpecError(f"layer_types has sliding layers but no sliding_window in {source}")
        return n - windowed, windowed, float(window or 0)
    mt = cfg.get("model_type")
    if not window:
        return n, 0, 0.0
    if mt in WINDOW_PATTERN:  # transformers' default: layer i slides unless (i + 1) % pattern == 0
        pattern = _get(cfg, "sliding_window_pattern", source, default=WINDOW_PATTERN[mt], hi=n + 1)
        return n // pattern, n - n // pattern, float(window)
    if mt in ALL_WINDOWED:
        return (0, n, float(window)) if _flag(cfg, "use_sliding_window", True, source) else (n, 0, 0.0)
    if mt in WINDOW_FROM_LAYER:  # Qwen2-style: layers from max_window_layers on slide when use_sliding_window
        if not _flag(cfg, "use_sliding_window", False, source):
            return n, 0, 0.0
        first = _get(cfg, "max_window_layers", source, default=n, lo=0, hi=n)
        return first, n - first, float(window)
    if _flag(cfg, "use_sliding_window", True, source):
        raise field_error("sliding_window", window, f"a config whose layer_types says which layers slide (model_type "
                          f"{mt!r}: which of its layers use the window is not known here)", source)
    return n, 0, 0.0


# which layers of a config without `layer_types` use its sliding window (transformers' config defaults)
WINDOW_PATTERN = {"gemma2": 2, "gemma3": 6, "gemma3_text": 6, "cohere2": 4}  # every pattern-th layer is global
ALL_WINDOWED = ("mistral", "phi3", "mixtral")  # every layer, when sliding_window is set
WINDOW_FROM_LAYER = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")  # layers >= max_window_layers
# tie_word_embeddings where a config omits it: its class's default in transformers (PretrainedConfig: True)
UNTIED_BY_DEFAULT = ("llama", "llama4_text", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                     "deepseek_v2", "deepseek_v3", "gpt_oss", "glm4_moe", "phi3", "t5")
WEIGHT_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
                 "float32": "fp32", "fp32": "fp32", "float": "fp32"}


def _moe_layer_count(cfg, n, n_experts, source):
    if not n_experts:
        return 0
    only = cfg.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only):
        raise field_error("mlp_only_layers", only, "a list of layer indices", source)
    only_dense = set(only)
    first_dense = _opt(cfg, "first_k_dense_replace", source, hi=n)
    freq = _opt(cfg, "moe_layer_freq", source, hi=n) or 1
    sparse_step = _opt(cfg, "decoder_sparse_step", source, hi=n) or 1
    interleave = _opt(cfg, "interleave_moe_layer_step", source, hi=n) or 1
    count = 0
    for i in range(n):
        if i in only_dense or i < first_dense or i % freq:
            continue
        if (i + 1) % sparse_step or (i + 1) % interleave:
            continue
        count += 1
    return count


def _tied(cfg, source):
    """tie_word_embeddings as given, else the default of the config's class in transformers (True for
    PretrainedConfig and Gemma; False for Llama, Qwen, Mistral, DeepSeek, ...: `UNTIED_BY_DEFAULT`)."""
    return _flag(cfg, "tie_word_embeddings", cfg.get("model_type") not in UNTIED_BY_DEFAULT, source)


def _dtypes(cfg, source="config.json"):
    key = "torch_dtype" if cfg.get("torch_dtype") is not None else "dtype"  # transformers >= 4.56 writes `dtype`
    given = cfg.get(key)
    if given is not None and (not isinstance(given, str) or given not in WEIGHT_DTYPES):
        raise field_error(key, given, f"one of {', '.join(WEIGHT_DTYPES)}", source)
    base = WEIGHT_DTYPES[given or "bfloat16"]
    q = cfg.get("quantization_config") or {}
    if not isinstance(q, dict):
        raise field_error("quantization_config", q, "a table of quantisation settings", source)
    method = str(q.get("quant_method", "")).lower()
    skip_list = q.get("modules_to_not_convert") or []
    if not isinstance(skip_list, list) or not all(isinstance(m, str) for m in skip_list):
        raise field_error("quantization_config.modules_to_not_convert", skip_list, "a list of module names", source)
    skip = " ".join(skip_list)
    if method == "mxfp4":
        return base, "mxfp4", base
    if method == "fp8":  # FP8 checkpoints keep the LM head and embedding in bf16 unless the config lists
        # the modules it leaves unconverted and lm_head is not among them (DeepSeek-V3, Qwen3-FP8 ship no list)
        head = "fp8" if q.get("modules_to_not_convert") is not None and "lm_head" not in skip else base
        return "fp8", "fp8", head
    return base, base, base


def _t5(cfg, name, source):
    d = _get(cfg, "d_model", source)
    h = _get(cfg, "num_heads", source)
    dkv = _get(cfg, "d_kv", source)
    dff = _get(cfg, "d_ff", source)
    n_dec = _get(cfg, "num_decoder_layers", source, default=cfg.get("num_layers"))
    n_enc = _get(cfg, "num_layers", source)
    gated = str(cfg.get("feed_forward_proj", "relu")).startswith("gated")
    inner = h * dkv
    ffn = (3 if gated else 2) * d * dff
    # Decoder layer reads self-attention q,k,v,o and cross-attention q,o each step; the
    # cross-attention K/V projections run once per sequence and the encoder only in prefill.
    # Each decode token attends over both caches (self and cross, each taken as `context` tokens):
    # 2 x 4 h d_kv FLOPs per cached token, consistent with the 2 x 2 h d_kv KV elements charged.
    return Architecture(
        name=name, d_model=d, n_layers=n_dec, vocab=_get(cfg, "vocab_size", source), n_heads=h,
        n_kv_heads=h, head_dim=dkv, p_attn_layer=6 * d * inner, attn_flops_per_ctx=2 * 4 * inner,
        kv_elems_per_tok=2 * 2 * inner,  # self + cross attention caches per decoder layer
        n_full_layers=n_dec, n_window_layers=0, window=0.0, n_dense_ffn_layers=n_dec,
        dense_ffn_width=dff, n_moe_layers=0, n_experts=0, top_k=0, expert_width=0, shared_width=0,
        tied=_tied(cfg, source), gated_ffn=gated, cross_attention=True,
        p_stored_only=n_dec * 2 * d * inner + n_enc * (4 * d * inner + ffn), source=source)


def from_dict(cfg, name="model", source="config.json"):
    """Build an `Architecture` from a parsed Hugging Face config dict."""
    if not isinstance(cfg, dict):
        raise SpecError(f"{source} must hold a JSON object, got {type(cfg).__name__}")
    if cfg.get("model_type") == "t5" or _flag(cfg, "is_encoder_decoder", False, source):
        return _t5(cfg, name, source)
    d = _get(cfg, "hidden_size", source)
    n = _get(cfg, "num_hidden_layers", source)
    h = _get(cfg, "num_attention_heads", source)
    h_kv = _get(cfg, "num_key_value_heads", source, default=h)
    if h % h_kv:
        raise field_error("num_key_value_heads", h_kv, f"a divisor of num_attention_heads={h}", source)
    head_dim = _get(cfg, "head_dim", source, default=d // h if d % h == 0 else None)
    vocab = _get(cfg, "vocab_size", source)
    kv_lora = _get(cfg, "kv_lora_rank", source, required=False)
    arch_list = cfg.get("architectures") or []
    if not isinstance(arch_list, list) or not all(isinstance(a, str) for a in arch_list):
        raise field_error("architectures", arch_list, "a list of class names", source)
    archs = " ".join(arch_list)
    draft_vocab = _opt(cfg, "draft_vocab_size", source)
    if draft_vocab > vocab:
        raise field_error("draft_vocab_size", draft_vocab, f"<= vocab_size ({vocab})", source)
    eagle = 3 if ("Eagle3" in archs or draft_vocab) else (1 if "Eagle" in archs else 0)
    in_mult = 2 if eagle == 3 else 1  # EAGLE-3 attention reads 2*d wide inputs (its q, k, v projections)
    if kv_lora:  # MLA, absorbed form
        rope = _get(cfg, "qk_rope_head_dim", source)
        nope = _get(cfg, "qk_nope_head_dim", source)
        v_dim = _get(cfg, "v_head_dim", source)
        q_lora = _get(cfg, "q_lora_rank", source, required=False)
        q_proj = d * q_lora + q_lora * h * (nope + rope) if q_lora else d * h * (nope + rope)
        p_attn = q_proj + d * (kv_lora + rope) + kv_lora * h * (nope + v_dim) + h * v_dim * d
        attn_flops = 2 * h * ((kv_lora + rope) + kv_lora)
        kv_elems = kv_lora + rope
    else:
        p_attn = in_mult * d * (h + 2 * h_kv) * head_dim + h * head_dim * d
        attn_flops = 4 * h * head_dim
        kv_elems = 2 * h_kv * head_dim
    n_full, n_window, window = _layer_kinds(cfg, n, source)
    n_experts = 0
    for key in ("n_routed_experts", "num_local_experts", "num_experts"):
        n_experts = n_experts or _opt(cfg, key, source, lo=1, hi=HI["num_experts"])
    n_moe = _moe_layer_count(cfg, n, n_experts, source)
    top_k = _get(cfg, "num_experts_per_tok", source) if n_moe else 0
    if n_moe and top_k > n_experts:
        raise field_error("num_experts_per_tok", top_k, f"<= number of experts ({n_experts})", source)
    ffn = _get(cfg, "intermediate_size", source)
    mt = cfg.get("model_type", "")
    if mt == "llama4_text":
        expert_w, dense_w, shared_w = ffn, _get(cfg, "intermediate_size_mlp", source), ffn
    else:
        expert_w = _get(cfg, "moe_intermediate_size", source, default=ffn) if n_moe else 0
        dense_w = ffn
        shared_w = (_opt(cfg, "shared_expert_intermediate_size", source)
                    or _opt(cfg, "n_shared_experts", source) * expert_w) if n_moe else 0
    w_dt, e_dt, h_dt = _dtypes(cfg, source)
    extra = 0
    if eagle:
        extra = (3 if eagle == 3 else 2) * d * d  # fc over concatenated hidden states
    block, features = _dflash(cfg, archs, n, source)
    if features:
        extra = features * d * d  # fc: the target's hidden states at `features` layers, concatenated -> d
    return Architecture(
        name=name, d_model=d, n_layers=n, vocab=vocab, n_heads=h, n_kv_heads=h_kv, head_dim=head_dim,
        p_attn_layer=p_attn, attn_flops_per_ctx=attn_flops, kv_elems_per_tok=kv_elems,
        n_full_layers=n_full, n_window_layers=n_window, window=window,
        n_dense_ffn_layers=n - n_moe, dense_ffn_width=dense_w, n_moe_layers=n_moe, n_experts=n_experts,
        top_k=top_k, expert_width=expert_w, shared_width=shared_w,
        tied=_tied(cfg, source), p_extra_read=extra, max_context=_max_context(cfg, source),
        weight_dtype=w_dt, expert_dtype=e_dt, head_dtype=h_dt,
        mtp_layers=_opt(cfg, "num_nextn_predict_layers", source), eagle_version=eagle,
        draft_vocab=draft_vocab, mla=bool(kv_lora), block_size=block, dflash_features=features, source=source)


def _dflash(cfg, archs, n_layers, source):
    """(block_size, target layers conditioned on) of a DFlash drafter (`DFlashDraftModel`, or a config with a
    `dflash_config` table); (0, 0) for any other model. `block_size` sits at the top level or in
    `dflash_config`; without `target_layer_ids` the drafter taps one target layer per draft layer (z-lab's
    `build_target_layer_ids`)."""
    table = cfg.get("dflash_config")
    if "DFlashDraftModel" not in archs and table is None:
        return 0, 0
    table = {} if table is None else table
    if not isinstance(table, dict):
        raise field_error("dflash_config", table, "a table (block_size, mask_token_id, target_layer_ids)", source)
    where = table if "block_size" in table else cfg
    block = _get(where, "block_size", source, lo=2)
    ids = table.get("target_layer_ids", cfg.get("target_layer_ids"))
    if ids is None:
        return block, n_layers
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                                      for i in ids):
        raise field_error("dflash_config.target_layer_ids", ids, "a non-empty list of target layer indices", source)
    return block, len(ids)


def _max_context(cfg, source):
    """The longest sequence the model takes (0: not given): max_position_embeddings, or a RoPE scaling's
    factor x original_max_position_embeddings where that is longer (YaRN added to a config)."""
    most = _opt(cfg, "max_position_embeddings", source, hi=1 << 40)
    rope = cfg.get("rope_scaling")
    if isinstance(rope, dict) and isinstance(rope.get("factor"), (int, float)) and not isinstance(rope["factor"], bool):
        orig = rope.get("original_max_position_embeddings")
        if isinstance(orig, int) and not isinstance(orig, bool) and 0 < rope["factor"] < 1e4 and 0 < orig < 1 << 40:
            most = max(most, int(rope["factor"] * orig))
    return most


def load_json(path):
    """Read and parse a config.json, turning every failure into a one-line `SpecError`."""
    path = pathlib.Path(path)
    return parse_json(read_text(path, "model config", 4 << 20), f"model config {str(path)!r}")
