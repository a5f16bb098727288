"""Regenerate the packaged presets from the sourced facts in ../shared/facts.

Run from the repository root: ``python tools/make_presets.py [FACTS_DIR]``.
Model presets are written as Hugging Face style ``config.json`` files (the
format users bring for their own models), hardware presets as specjax
hardware TOML files. Each file records the URL its numbers come from.
"""

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_MODELS = ROOT / "specjax" / "presets" / "models"
OUT_HW = ROOT / "specjax" / "presets" / "hardware"

# Default one-way link latency per all-reduce step; not in the facts (assumption, README).
LINK_LATENCY_S = 5e-6
# GPUs one NVLink-class domain joins (docs/model.md §2.5): 8 in an HGX/OAM node unless listed. NVL72 racks join
# 72; a TPU slice joins its chips over ICI (pod sizes from the TPU docs). Collectives beyond go over the
# inter-node network, whose per-GPU bandwidth and latency are assumptions (one 400 Gb/s NIC per GPU).
GPUS_PER_NODE = {"gb200": 72, "gb300": 72, "tpu-v4": 4096, "tpu-v5e": 256, "tpu-v5p": 8960, "tpu-v6e": 256}
INTERNODE_BYTES_PER_S = 5e10
INTERNODE_LATENCY_S = 1e-5

COMMON = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings",
          "max_position_embeddings")


def _dtype(f):
    t = str(f.get("torch_dtype") or "bfloat16")
    return "float16" if t.startswith("float16") else "bfloat16"


def model_config(f):
    slug = f["slug"]
    cfg = {k: f[k] for k in COMMON if f.get(k) is not None}
    cfg["torch_dtype"] = _dtype(f)
    arch = f["architecture"]
    if slug.startswith("t5-"):
        return {
            "architectures": ["T5ForConditionalGeneration"], "model_type": "t5",
            "d_model": f["hidden_size"], "d_ff": f["intermediate_size"], "d_kv": f["head_dim"],
            "num_heads": f["num_attention_heads"], "num_layers": f["num_encoder_layers"],
            "num_decoder_layers": f["num_decoder_layers"], "vocab_size": f["vocab_size"],
            "feed_forward_proj": f["feed_forward_proj"], "is_encoder_decoder": True,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        }
    if slug.startswith("eagle3-"):
        cfg.update(architectures=["LlamaForCausalLMEagle3"], model_type="llama",
                   draft_vocab_size=f["draft_vocab_size"])
        if f.get("eagle_aux_hidden_state_layer_ids"):
            cfg["eagle_aux_hidden_state_layer_ids"] = f["eagle_aux_hidden_state_layer_ids"]
        return cfg
    if slug.startswith("eagle-"):
        cfg.update(architectures=["EagleLlamaForCausalLM"], model_type="llama")
        return cfg
    if slug.startswith("gpt-oss"):
        n = f["num_hidden_layers"]
        cfg.update(architectures=["GptOssForCausalLM"], model_type="gpt_oss",
                   num_local_experts=f["num_experts"], num_experts_per_tok=f["num_experts_per_tok"],
                   sliding_window=f["sliding_window"],
                   layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)],
                   quantization_config={"quant_method": "mxfp4",
                                        "modules_to_not_convert": f["quantization"]["modules_to_not_convert"]})
        return cfg
    if slug.startswith("mixtral"):
        cfg.update(architectures=["MixtralForCausalLM"], model_type="mixtral",
                   num_local_experts=f["num_experts"], num_experts_per_tok=f["num_experts_per_tok"])
        return cfg
    if slug == "deepseek-v3":
        for k in ("moe_intermediate_size", "n_shared_experts", "first_k_dense_replace", "num_experts_per_tok",
                  "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                  "num_nextn_predict_layers"):
            cfg[k] = f[k]
        cfg.pop("head_dim", None)
        cfg.update(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                   n_routed_experts=f["num_experts"], moe_layer_freq=1,
                   # as shipped: no modules_to_not_convert; FP8 checkpoints keep a bf16 LM head
                   quantization_config={"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]})
        return cfg
    if slug == "glm-4.5-air":
        for k in ("moe_intermediate_size", "n_shared_experts", "first_k_dense_replace", "num_experts_per_tok",
                  "num_nextn_predict_layers"):
            cfg[k] = f[k]
        cfg.update(architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe", n_routed_experts=f["num_experts"])
        return cfg
    if slug.startswith("qwen3-") and f.get("num_experts"):
        cfg.update(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", num_experts=f["num_experts"],
                   num_experts_per_tok=f["num_experts_per_tok"], moe_intermediate_size=f["moe_intermediate_size"],
                   decoder_sparse_step=1, mlp_only_layers=[])
        return cfg
    if slug == "qwen2-57b-a14b":
        cfg.update(architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", num_experts=f["num_experts"],
                   num_experts_per_tok=f["num_experts_per_tok"], moe_intermediate_size=f["moe_intermediate_size"],
                   shared_expert_intermediate_size=f["shared_expert_intermediate_size"],
                   decoder_sparse_step=1, mlp_only_layers=[])
        return cfg
    if slug.startswith("llama-4"):
        n = f["num_hidden_layers"]
        step = f.get("moe_layer_step") or 1
        cfg.update(architectures=["Llama4ForCausalLM"], model_type="llama4_text",
                   num_local_experts=f["num_experts"], num_experts_per_tok=f["num_experts_per_tok"],
                   intermediate_size=f["moe_intermediate_size"], intermediate_size_mlp=f["intermediate_size_mlp"],
                   interleave_moe_layer_step=step, attention_chunk_size=f["attention_chunk_size"],
                   layer_types=["full_attention" if (i + 1) % 4 == 0 else "chunked_attention" for i in range(n)])
        return cfg
    if arch.startswith("Qwen3"):
        cfg.update(architectures=["Qwen3ForCausalLM"], model_type="qwen3")
        return cfg
    if arch.startswith("Qwen2"):
        cfg.update(architectures=["Qwen2ForCausalLM"], model_type="qwen2", use_sliding_window=False)
        return cfg
    cfg.update(architectures=["LlamaForCausalLM"], model_type="llama")
    return cfg


def hardware_toml(h):
    gib = h["slug"] in ("tpu-v4", "tpu-v5p")  # Google prints GiB for these (facts note)
    hbm = h["hbm_gb"] * (2**30 if gib else 1e9)
    lines = [
        f'# {h["name"]}: dense peaks (sparse datasheet figures halved where printed with sparsity).',
        f'# source: {h["source_url"]}',
        f'# canonical: {h.get("canonical_url", "")}',
        f'name = "{h["name"]}"',
        f'hbm_bytes_per_s = {h["hbm_tb_s"] * 1e12:.6g}',
        f"hbm_bytes = {hbm:.6g}",
        f'link_bytes_per_s = {h["interconnect_gb_s"] * 1e9 / 2:.6g}  '
        f'# one direction: half the bidirectional {h["interconnect_gb_s"]} GB/s',
        f"link_latency_s = {LINK_LATENCY_S:g}  # assumption, not from the source",
        f"gpus_per_node = {GPUS_PER_NODE.get(h['slug'], 8)}  # NVLink-class domain (ICI slice for TPUs)",
        f"internode_bytes_per_s = {INTERNODE_BYTES_PER_S:g}  # assumption: one 400 Gb/s NIC per GPU",
        f"internode_latency_s = {INTERNODE_LATENCY_S:g}  # assumption, not from the source",
        f'source = "{h["source_url"]}"',
        "",
        "[flops_per_s]",
        f'bf16 = {h["bf16_tflops_dense"] * 1e12:.6g}',
        f'fp16 = {h["bf16_tflops_dense"] * 1e12:.6g}',
    ]
    if h.get("fp8_tflops_dense"):
        lines.append(f'fp8 = {h["fp8_tflops_dense"] * 1e12:.6g}')
    if h.get("fp4_tflops_dense"):
        lines.append(f'fp4 = {h["fp4_tflops_dense"] * 1e12:.6g}')
    if h.get("int8_tops_dense"):
        lines.append(f'int8 = {h["int8_tops_dense"] * 1e12:.6g}')
    return "\n".join(lines) + "\n"


def main(facts):
    facts = pathlib.Path(facts)
    OUT_MODELS.mkdir(parents=True, exist_ok=True)
    OUT_HW.mkdir(parents=True, exist_ok=True)
    for f in json.loads((facts / "models.json").read_text()):
        cfg = model_config(f)
        cfg["_specjax"] = {"slug": f["slug"], "name": f["name"], "source_url": f["source_url"],
                           "canonical_url": f.get("canonical_url"), "confidence": f.get("confidence")}
        (OUT_MODELS / f"{f['slug']}.json").write_text(json.dumps(cfg, indent=1) + "\n")
    for h in json.loads((facts / "hardware.json").read_text()):
        (OUT_HW / f"{h['slug']}.toml").write_text(hardware_toml(h))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ROOT.parent / "shared" / "facts")
