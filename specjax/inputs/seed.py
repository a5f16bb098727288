"""The headline scenario: dense Llama-3-70B vs MoE gpt-oss-120b on one H200.

The source article published 1.92x at batch 1, crossover at batch 224 and 0.74x at batch 512
for Llama-3-70B, and a crossover at batch 1,981 for gpt-oss-120b, without its assumptions.
This set reproduces them within 2%: whole-pass roofline, bf16 compute (989.5 TFLOP/s),
4.8 TB/s, bf16 Llama / mxfp4-expert gpt-oss, fp8 KV cache, context 2,048, drafter cost
ratio c = 0.145 of the target's pass, k = 2, alpha = 0.814. Memory is reported, not imposed:
Llama-3-70B in bf16 does not fit on one 141 GB H200 (the article ignored capacity).
"""

from .scenario import Scenario

PUBLISHED = {"llama-3-70b": {"speedup_b1": 1.92, "crossover": 224, "speedup_b512": 0.74},
             "gpt-oss-120b": {"crossover": 1981}}
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 224, 256, 512, 1024, 1981, 2048, 4096)


def scenarios():
    """The two headline `Scenario`s, keyed by target slug."""
    common = dict(hardware="h200", drafter="ratio", draft_cost=0.145, k=2, alpha=0.814, context=2048.0,
                  kv_dtype="fp8", compute_dtype="bf16", roofline="pass", engine="roofline")
    return {t: Scenario(target=t, **common) for t in PUBLISHED}
