"""Plain-Python floats implementation of docs/model.md, written independently of the JAX kernels.

Models and hardware are dicts of floats (from the pytrees via `as_floats`). Used by tests
to compare the kernels on many points, and by bench/ as the scalar-loop baseline.
"""

import math


def as_floats(tree):
    return {k: float(getattr(tree, k)) for k in tree.field_names}


def tau(alpha, k):
    if alpha == 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def distinct_experts(n, e, r):
    if e == 0:
        return 0.0
    return e * (1.0 - (1.0 - r / e) ** n)


def kv_ways(m, tp):
    """GPUs the KV cache is split over: min(tp, KV heads), at least 1 (`kv_heads` is 1 for MLA)."""
    return max(min(tp, m.get("kv_heads", 1.0)), 1.0)


def layout_of(tp=1.0, ep=1.0, dp=1.0, imbalance=1.0, draft_tp=0.0):
    """A deployment layout as a plain dict (docs/model.md §2.4)."""
    return dict(tp=float(tp), ep=float(ep), dp=float(dp), imbalance=float(imbalance), draft_tp=float(draft_tp))


def drafter_layout(lay):
    """The drafter's layout: the target's, or pure TP over draft_tp GPUs."""
    return lay if not lay["draft_tp"] else layout_of(tp=lay["draft_tp"])


def _link(hw, group):
    if group > hw.get("gpus_per_node", 8.0):
        return hw.get("internode_bytes_per_s", 5e10), hw.get("internode_latency_s", 1e-5)
    return hw["link_bytes_per_s"], hw["link_latency_s"]


def ring_all_reduce(hw, nbytes, group):
    if group <= 1:
        return 0.0
    bw, lat = _link(hw, group)
    return 2 * (group - 1) / group * nbytes / bw + lat


def all_to_all(hw, m, n, lay):
    """One dispatch or combine: each GPU sends its n/G tokens' activations to their r experts."""
    g, ep = lay["tp"] * lay["dp"], lay["ep"]
    if ep <= 1:
        return 0.0
    sent = n / g * m["top_k"] * m["d_model"] * 2.0
    off_rank = (ep - 1) / ep
    off_node = min(max(0.0, 1 - hw.get("gpus_per_node", 8.0) / g), off_rank)
    intra, inter = (off_rank - off_node) * sent, off_node * sent
    t = max(intra / hw["link_bytes_per_s"], inter / hw.get("internode_bytes_per_s", 5e10))
    return t + (hw.get("internode_latency_s", 1e-5) if off_node > 0 else hw["link_latency_s"])


def communication(hw, m, n, lay):
    """Per layer an all-reduce inside the attention-DP rank; per dense layer one over all G GPUs; per MoE
    layer under EP with DP attention a dispatch and a combine all-to-all plus the expert group's
    all-reduce (without DP attention every GPU holds every token: the FFN all-reduce as under TP)."""
    g = lay["tp"] * lay["dp"]
    act = m["d_model"] * 2.0
    n_moe = m["n_moe_layers"] if lay["ep"] > 1 and lay["dp"] > 1 else 0.0  # tokens partitioned: all-to-all
    attention = ring_all_reduce(hw, n / lay["dp"] * act, lay["tp"])
    dense_ffn = ring_all_reduce(hw, n * act, g)
    moe = 2 * all_to_all(hw, m, n, lay) + (ring_all_reduce(hw, n * m["top_k"] / lay["ep"] * act, g / lay["ep"])
                                           if n_moe else 0.0)
    return m["n_layers"] * attention + (m["n_layers"] - n_moe) * dense_ffn + n_moe * moe


def pass_ops(m, batch, q, ctx, locality=0.0, lay=None):
    """(flops, bytes) per GPU of each operator of one pass (the list `t_pass` takes the roofline of)."""
    lay = lay or layout_of()
    tp, dp = lay["tp"], lay["dp"]
    imb = lay["imbalance"] if lay["ep"] > 1 else 1.0  # no EP: every GPU holds a slice of every expert
    g = tp * dp
    n = batch * q
    kv = m["kv_elems_per_tok"] * m["b_kv"]
    l_win = min(ctx, m["window"])
    n_route = q * (1.0 + (1.0 - locality) * (batch - 1.0))
    seqs = batch / dp  # sequences of one attention-DP rank
    ops = [  # (flops, bytes) per GPU
        # dense: the n tokens of all ranks over G GPUs; each DP rank holds its own attention projections
        (2 * n * m["p_dense"] / g, (m["p_dense"] - m.get("p_attn", 0.0)) * m["b_dense"] / g
         + m.get("p_attn", 0.0) * m["b_dense"] / tp),
        (2 * n * m["p_head"] / g, m["p_head"] * m["b_head"] / g),
        # experts: E/ep per rank, U(n)/ep of them touched, each split G/ep ways; busiest rank x imbalance
        (2 * n * m["n_moe_layers"] * m["top_k"] * m["p_expert"] / g * imb,
         m["n_moe_layers"] * (distinct_experts(n_route, m["n_experts"], m["top_k"]) / lay["ep"]) * m["p_expert"]
         * m["b_expert"] / (g / lay["ep"]) * imb),
    ]
    kv_split = kv_ways(m, tp)  # docs/model.md §2.4: KV splits over min(tp, KV heads); MLA not at all
    for layers, l_eff in ((m["n_full_layers"], ctx), (m["n_window_layers"], l_win)):
        ops.append((layers * m["attn_flops_per_ctx"] * (seqs * q) * l_eff / tp,
                    layers * (seqs * kv * l_eff + seqs * q * kv) / kv_split))
    return ops


def t_pass(m, hw, batch, q, ctx, tp=1.0, mode="operator", locality=0.0, lay=None):
    """One pass per GPU. `lay` (`layout_of`) gives tp, ep, dp_attention and the imbalance; without it,
    pure tensor parallelism over `tp`."""
    lay = lay or layout_of(tp)
    n = batch * q
    ops = pass_ops(m, batch, q, ctx, locality, lay)
    f_rate = hw["flops_per_s"] * hw["flops_efficiency"]
    w_rate = hw["hbm_bytes_per_s"] * hw["hbm_efficiency"]
    sigma = hw.get("non_overlap", 0.0)
    if mode == "operator":
        roof = sum(max(f / f_rate, w / w_rate) + sigma * min(f / f_rate, w / w_rate) for f, w in ops)
    else:
        tm, tw = sum(f for f, _ in ops) / f_rate, sum(w for _, w in ops) / w_rate
        roof = max(tm, tw) + sigma * min(tm, tw)
    if m["p_dense"] + m["p_head"] + m["p_expert"] == 0:
        return 0.0
    overhead = (hw["fixed_overhead_s"] + m["n_layers"] * hw.get("layer_overhead_s", 0.0)  # docs/model.md §2.6
                + m.get("n_kernels", 0.0) * hw.get("kernel_overhead_s", 0.0))
    return roof + communication(hw, m, n, lay) + overhead + token_traffic(m, hw, n, lay)


def token_traffic(m, hw, n, lay=None):
    """docs/model.md §2.7's per-token cost, per GPU: n / d_a tokens each move `activation_traffic` d-wide bf16
    vectors per layer (replicated over tp), and the n r token-expert pairs, split over the ep ranks, move
    `expert_traffic` vectors per MoE layer; all at eta_W W."""
    lay = lay or layout_of()
    vectors = (n / lay["dp"] * m["n_layers"] * hw.get("activation_traffic", 0.0)
               + n * m["top_k"] / lay["ep"] * m["n_moe_layers"] * hw.get("expert_traffic", 0.0))
    return vectors * m["d_model"] * 2.0 / (hw["hbm_bytes_per_s"] * hw["hbm_efficiency"])


def tau_from_rates(rates, k):
    """docs/model.md §4.3 at integer k: 1 + sum_i prod_{j<=i} a_j, a_i = the last rate beyond the vector."""
    out, reach = 1.0, 1.0
    for i in range(1, int(k) + 1):
        reach *= rates[min(i, len(rates)) - 1]
        out += reach
    return out


def tree_tau(rate_at, topk, tokens, depth):
    """The README's tree estimate (docs/model.md §4.4): N - 1 candidates spread over the depths, at most
    topk^d at depth d; the accepted node has m_d = w_d / w_{d-1} candidate children."""
    remaining, above, out, reach = tokens - 1, 1, 1.0, 1.0
    for d in range(1, int(depth) + 1):
        w = min(topk ** d, math.ceil(remaining / (depth - d + 1)))
        remaining -= w
        m, a = w / above, rate_at(d)
        p = (1 - (1 - a) ** m) if m >= 1 else m * a
        reach *= p
        out += reach
        above = w
    return out


def speedup(*args, **kw):
    """S (docs/model.md §5.3); see `step_times` for the arguments."""
    t, base, t_sd = step_times(*args, **kw)
    return t * base / t_sd


def step_times(hw, tgt, draft, batch, k, alpha, ctx, tp=1.0, c=0.0, mode="operator", locality=0.0, lay=None,
               rates=None, tree=None, kv_budget=math.inf, passes=None):
    """(tau, T_target(B, 1), T_sd(B)) (docs/model.md §5.2); `rates`: per-position acceptance; `tree`: (topk,
    tokens) of a draft tree of depth k; `kv_budget`: the drafter's KV tokens per layer; `passes`: a
    parallel drafter's passes p, each over B x k tokens (docs/model.md §5.2; None: a chain of k passes)."""
    lay = lay or layout_of(tp)
    base = t_pass(tgt, hw, batch, 1, ctx, mode=mode, locality=locality, lay=lay)
    has_draft = draft["p_dense"] + draft["p_head"] + draft["p_expert"] > 0
    dctx = min(ctx, kv_budget)
    extra = c * base + (hw.get("draft_overhead_s", 0.0) if has_draft else 0.0)
    first = t_pass(draft, hw, batch, 1, dctx, mode=mode, locality=locality, lay=drafter_layout(lay)) + extra
    topk, tokens = tree or (1, k + 1)
    rest = t_pass(draft, hw, batch, topk, dctx, mode=mode, locality=locality, lay=drafter_layout(lay)) + extra
    drafting = (first + (k - 1) * rest) if k >= 1 else 0.0
    if passes is not None:  # one block of k tokens, p times
        drafting = passes * (t_pass(draft, hw, batch, k, dctx, mode=mode, locality=locality,
                                    lay=drafter_layout(lay)) + extra)
    t_sd = drafting + t_pass(tgt, hw, batch, tokens, ctx, mode=mode, locality=locality, lay=lay) \
        + (hw.get("step_overhead_s", 0.0) if k > 0 else 0.0)
    rate_at = (lambda d: rates[min(d, len(rates)) - 1]) if rates else (lambda d: alpha)
    if tree and not (topk == 1 and tokens == k + 1):
        t = tree_tau(rate_at, topk, tokens, k)
    else:
        t = tau_from_rates(rates, k) if rates else tau(alpha, k)
    return t, base, t_sd


def weight_bytes(m):
    return (m["p_dense"] * m["b_dense"] + (m["p_head"] * m["head_resident"] + m["p_stored"]) * m["b_head"]
            + m["n_moe_layers"] * m["n_experts"] * m["p_expert"] * m["b_expert"])


def kv_per_seq(m, tokens):
    return m["kv_elems_per_tok"] * m["b_kv"] * (m["n_full_layers"] * tokens
                                                 + m["n_window_layers"] * min(tokens, m["window"]))


def max_batch(hw, models, tokens, tp=1.0, u=0.9, layouts=None):
    """`tokens`: KV tokens per sequence, one number or one per model."""
    tokens = tokens if isinstance(tokens, (list, tuple)) else [tokens] * len(models)
    """Largest batch that fits on the busiest GPU: per GPU, each model's weights over its layout's GPUs
    (attention projections whole on every DP rank) + its KV of B/dp sequences over min(tp, KV heads)."""
    layouts = layouts or [layout_of(tp)] * len(models)
    w = sum(((weight_bytes(m) - m.get("p_attn", 0.0) * m["b_dense"]) / (lay["tp"] * lay["dp"])
             + m.get("p_attn", 0.0) * m["b_dense"] / lay["tp"]) * m.get("weights_resident", 1.0)
            for m, lay in zip(models, layouts))
    free = hw["hbm_bytes"] * u - w
    per = sum(kv_per_seq(m, t) / lay["dp"] / kv_ways(m, lay["tp"]) for m, lay, t in zip(models, layouts, tokens))
    return 0.0 if free <= 0 else math.floor(free / per)


def prefill_per_token(m, hw, input_len, lay=None, chunk=2048.0):
    """docs/model.md §3's c_p: a prompt token's FLOPs (a pass over the L_in prompt tokens of one sequence at
    context L_in / 2, per token) at eta_P F, or its chunk's bytes (min(L_in, chunk) tokens) over the
    chunk's tokens at eta_W W, whichever is longer, plus one token's activation traffic (`token_traffic`;
    0 for a model without weights)."""
    if m["p_dense"] + m["p_head"] + m["p_expert"] == 0:
        return 0.0
    flops = sum(f for f, _ in pass_ops(m, 1.0, input_len, input_len / 2, 0.0, lay)) / input_len
    n_c = min(input_len, chunk)
    nbytes = sum(w for _, w in pass_ops(m, 1.0, n_c, input_len / 2, 0.0, lay)) / n_c
    return max(flops / (hw["flops_per_s"] * hw.get("prefill_efficiency", 1.0)),
               nbytes / (hw["hbm_bytes_per_s"] * hw["hbm_efficiency"])) + token_traffic(m, hw, 1.0, lay)


def serve_side(t_of, tau_, c_p, input_len, output_len, cap, qps, chunk=2048.0):
    """One side of docs/model.md §10 by a different route than the kernel: bisection of
    f(B) = B - qps N T(B), T(B) = t(max(B, 1)) / (1 - qps L_in c_p), in linear B on [0, cap].
    Returns (batch, T, tpot, ttft, saturated); TTFT = T / 2 + ceil(L_in / chunk) T + L_in c_p."""
    share = 1.0 - qps * input_len * c_p
    n = output_len / tau_

    def f(b):
        return b - qps * n * t_of(max(b, 1.0)) / share

    if share <= 0 or f(cap) < 0:
        return cap, None, None, math.inf, True
    lo, hi = 0.0, cap
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    b = 0.5 * (lo + hi)
    t = t_of(max(b, 1.0)) / share
    return b, t, t / tau_, (0.5 + math.ceil(input_len / chunk)) * t + input_len * c_p, False


def closed_loop_sim(t_of, tau_, c_p, input_len, output_len, clients, chunk=2048.0, cap=math.inf, lifetimes=24,
                    warm=4):
    """docs/model.md §11 by discrete simulation (another algorithm than the kernel's mean field): `clients`
    clients, each sending its next request (`input_len` prompt, `output_len` output tokens, fixed) the
    moment its last one ends. The engine does not wait for it: while other requests run, the iteration
    after the one that ended it has already started, and the new request is admitted to the one after
    that (to the next one when the engine is idle). Each iteration admits arrived requests while fewer than
    `cap` run (prefill or decode, first come first served), decodes one step for each decoding sequence
    (`tau_` tokens) and prefills up to `chunk` prompt tokens of the admitted requests in arrival order; it
    takes t_of(max(B, 1)) + (prompt tokens) c_p, B the decoding sequences. The iteration that ends a prompt
    emits its first token; the request decodes from the next one until it has `output_len` tokens.
    Clients start staggered over one request's decode; requests that arrive after `warm` lifetimes are
    measured. Returns a dict of means: throughput_req_s (completions per second), tpot_s ((E2E - TTFT) /
    (L_out - 1)), ttft_s, e2e_s, batch (decode sequences, time-weighted), prompt_tokens_per_iter."""
    steps = math.ceil((output_len - 1) / tau_ - 1e-9)
    life = (steps + math.ceil(input_len / chunk)) * t_of(1.0)  # a lower bound of one request's lifetime
    # per request: [arrival, state, remaining prompt, generated after the first token, first token, ready]
    reqs = [[None, "decode", 0.0, math.floor(i / clients * steps) * tau_, None, 0] for i in range(clients)]
    now, it, ends, done = 0.0, 0, [], []
    t_warm = warm * life
    acc = dict(time=0.0, batch=0.0, prompt=0.0, iters=0)
    while now <= lifetimes * life:
        running = sum(r[1] in ("prefill", "decode") for r in reqs)
        for r in sorted((r for r in reqs if r[1] == "queued" and r[5] <= it), key=lambda r: r[0]):
            if running < cap:  # admit in arrival order
                r[1] = "prefill"
                running += 1
        decoding = [r for r in reqs if r[1] == "decode"]
        budget, prompt, prefilled = chunk, 0.0, []
        for r in sorted((r for r in reqs if r[1] == "prefill"), key=lambda r: r[0]):
            take = min(r[2], budget)
            r[2] -= take
            budget -= take
            prompt += take
            if r[2] <= 0:
                prefilled.append(r)
        dt = t_of(max(len(decoding), 1)) + prompt * c_p
        now += dt
        it += 1
        if now > t_warm:
            acc["time"] += dt
            acc["batch"] += len(decoding) * dt
            acc["prompt"] += prompt
            acc["iters"] += 1
        finished = [r for r in decoding if r[3] + tau_ >= output_len - 1 - 1e-9]
        for r in decoding:
            r[3] += tau_
        for r in prefilled:
            r[1], r[4] = "decode", now
            if output_len <= 1:
                finished.append(r)
        busy = len(reqs) > len(finished)  # other requests keep the engine running: the next iteration started
        for r in finished:
            if r[0] is not None:
                done.append((r[0], r[4], now))
            if now > t_warm:
                ends.append(now)
            r[:] = [now, "queued", float(input_len), 0.0, None, it + (1 if busy else 0)]
    ok = [d for d in done if d[0] >= t_warm]
    e2e = sum(c - a for a, _, c in ok) / len(ok)
    ttft = sum(f - a for a, f, _ in ok) / len(ok)
    return dict(throughput_req_s=(len(ends) - 1) / (ends[-1] - ends[0]), e2e_s=e2e, ttft_s=ttft,
                tpot_s=(e2e - ttft) / (output_len - 1), batch=acc["batch"] / acc["time"],
                prompt_tokens_per_iter=acc["prompt"] / acc["iters"])


def request_tpot_simulation(iteration_s, rates, k, sigma, n=100_000, seed=0, percentiles=(50.0, 90.0, 99.0)):
    """docs/model.md §10.1 by sampling requests (another algorithm than the kernel's quantile map): draw
    n requests' z_i ~ N(0, 1); request i accepts position j with log-odds logit a_j + delta + sigma z_i
    (a_j the conditional rates, the last one beyond the vector); delta is found by bisection so that
    these n requests' harmonic mean of tau_i is the aggregate tau of `rates` (the tokens per step of the
    batch); each request's TPOT is iteration_s / tau_i. Returns the TPOT percentiles (numpy's default
    linear interpolation), the mean TPOT, and the harmonic and arithmetic means of tau_i."""
    import numpy as np

    z = np.random.default_rng(seed).standard_normal(n)
    a = np.array([rates[min(i, len(rates)) - 1] for i in range(1, int(k) + 1)], dtype=float)
    with np.errstate(divide="ignore"):
        logit = np.log(a) - np.log1p(-a)

    def taus(d):
        p = 1.0 / (1.0 + np.exp(-(logit[None, :] + d + sigma * z[:, None])))
        return 1.0 + np.cumprod(p, axis=1).sum(axis=1)

    aggregate = tau_from_rates(rates, k)
    lo, hi = -60.0, 60.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.mean(1.0 / taus(mid)) > 1.0 / aggregate else (lo, mid)
    t = taus(0.5 * (lo + hi))
    tpot = iteration_s / t
    return dict(percentiles=np.percentile(tpot, percentiles), mean_tpot=float(tpot.mean()),
                harmonic_tau=float(1.0 / np.mean(1.0 / t)), mean_tau=float(t.mean()))



def sign_change_points(x, g):
    """(down, up): lists of where a densely sampled g(x) goes below zero and where it comes back (g = 0
    counts as not below), each located by linear interpolation of g in log x between the two samples
    around it. The reference for the crossover searches (`cost._search.sign_changes`), independent of
    their grid, refinement and root finder."""
    x, g = [float(v) for v in x], [float(v) for v in g]
    down, up = [], []
    for i in range(len(x) - 1):
        b0, b1 = g[i] < 0, g[i + 1] < 0
        if b0 != b1:
            t = g[i] / (g[i] - g[i + 1])
            lx0, lx1 = math.log(x[i]), math.log(x[i + 1])
            (down if b1 else up).append(math.exp(lx0 + t * (lx1 - lx0)))
    return down, up
