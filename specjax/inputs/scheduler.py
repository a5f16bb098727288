"""The engine's scheduler limits as defaults: max_num_seqs and chunk_tokens per engine and GPU class.

A serving engine caps the running batch (vLLM `--max-num-seqs`, SGLang `--max-running-requests`,
TensorRT-LLM `--max_batch_size`) and the tokens of one iteration (vLLM `--max-num-batched-tokens`,
SGLang `--chunked-prefill-size`, TensorRT-LLM `--max_num_tokens`), with defaults that depend on the GPU.
An engine profile carries them in a `[scheduler]` table: top-level values, then `[[scheduler.tier]]`
tables applied in order where the GPU qualifies (`min_hbm_gib`: HBM per GPU in GiB at least this;
`not_named`: none of these substrings in the hardware slug), and `speculative_max_num_seqs`, the cap of
a speculative server where the engine sets its own (SGLang: 48). A profile without the table (the pure
roofline, the pooled `generic`, a user's TOML, an engine without a preset) borrows the
default engine's (`engines.DEFAULT`, vLLM), and says so.

The user's value (`--max-num-seqs`, `--chunk-tokens`, a spec or CSV column) always wins. `resolve`
returns each value with where it came from, which the JSON `inputs` echo reports.
"""

from ..errors import field_error

NAMES = ("max_num_seqs", "chunk_tokens")  # catalogue rows the scheduler resolves
KEYS = NAMES + ("speculative_max_num_seqs",)
TIER_KEYS = KEYS + ("min_hbm_gib", "not_named")
GIB = 2.0 ** 30


def _count(value, where, source):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1e8:
        raise field_error(where, value, "an integer 1 <= x <= 1e8", source)
    return value


def from_table(table, source):
    """A validated `[scheduler]` table (None where the file has none): the top-level limits, a `source`
    string, and its `tier` list."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise field_error("scheduler", table, "a table of scheduler limits", source)
    unknown = set(table) - set(KEYS) - {"source", "tier"}
    if unknown:
        raise field_error("scheduler." + sorted(unknown)[0], table[sorted(unknown)[0]],
                          f"one of {', '.join(KEYS + ('source', 'tier'))}", source)
    out = {k: _count(table[k], f"scheduler.{k}", source) for k in KEYS if k in table}
    if not all(k in out for k in NAMES):
        raise field_error("scheduler", sorted(table), "a table giving max_num_seqs and chunk_tokens", source)
    tiers = table.get("tier", [])
    if not isinstance(tiers, list):
        raise field_error("scheduler.tier", tiers, "[[scheduler.tier]] tables", source)
    out["tier"] = tuple(_tier(t, i, source) for i, t in enumerate(tiers))
    out["source"] = str(table.get("source", ""))
    return out


def _tier(t, i, source):
    where = f"scheduler.tier[{i}]"
    if not isinstance(t, dict) or set(t) - set(TIER_KEYS) or "min_hbm_gib" not in t:
        raise field_error(where, t, f"a table with min_hbm_gib and some of {', '.join(KEYS)} (not_named: a list "
                          "of hardware slug substrings)", source)
    gib = t["min_hbm_gib"]
    if isinstance(gib, bool) or not isinstance(gib, (int, float)) or not 0 <= gib <= 1e6:
        raise field_error(f"{where}.min_hbm_gib", gib, "a number 0 <= x <= 1e6 (GiB per GPU)", source)
    names = t.get("not_named", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise field_error(f"{where}.not_named", names, "a list of hardware slug substrings", source)
    out = {k: _count(t[k], f"{where}.{k}", source) for k in KEYS if k in t}
    return dict(out, min_hbm_gib=float(gib), not_named=tuple(names))


def engine_defaults(table, hardware_slug, hbm_bytes, speculative):
    """The limits a `[scheduler]` table gives on one GPU: {name: value} for `NAMES`, plus the applied
    tier's GiB threshold (None: the top-level values) under "tier"."""
    out, tier = {k: table[k] for k in KEYS if k in table}, None
    for t in table["tier"]:
        if hbm_bytes / GIB >= t["min_hbm_gib"] and not any(n in hardware_slug for n in t["not_named"]):
            out.update({k: t[k] for k in KEYS if k in t})
            tier = t["min_hbm_gib"]
    if speculative and "speculative_max_num_seqs" in out:
        out["max_num_seqs"] = out["speculative_max_num_seqs"]
    return {n: out[n] for n in NAMES} | {"tier": tier}


def engine_limits(engine_profile, default_profile, hardware_profile, speculative):
    """{name: value} for `NAMES`: the engine's scheduler defaults on this GPU (`resolve` without a user value)."""
    return {n: v for n, (v, _) in resolve(engine_profile, default_profile, hardware_profile, speculative, {}).items()}


def resolve(engine_profile, default_profile, hardware_profile, speculative, given):
    """{name: (value, where it came from)} for `NAMES`: the user's value where `given` has one, else the
    engine's scheduler default on this GPU (`default_profile`'s where the engine's profile has none); plus
    "plain_max_num_seqs" where the engine caps its plain server otherwise than its speculative one and
    the user gave no cap (`Load.plain_max_num_seqs`: the plain side of a comparison runs as the engine
    would without speculation)."""
    table, engine = engine_profile.scheduler, engine_profile.slug
    borrowed = table is None
    if borrowed:
        table = default_profile.scheduler
    hw = hardware_profile.slug
    d = engine_defaults(table, hw, float(hardware_profile.hbm_bytes), speculative)
    gib = float(hardware_profile.hbm_bytes) / GIB
    cls = f"{hw}, {gib:.0f} GiB" + (f" >= {d['tier']:g} GiB" if d["tier"] is not None else "")
    whose = (f"{default_profile.slug}'s default (engine {engine} states none)" if borrowed
             else f"{engine}'s default")
    cite = f"; {table['source']}" if table["source"] else ""
    out = {}
    for n in NAMES:
        if given.get(n) is not None:
            out[n] = (given[n], "given")
        else:
            spec = " for a speculative server" if (n == "max_num_seqs" and speculative
                                                   and "speculative_max_num_seqs" in table) else ""
            out[n] = (d[n], f"{whose} on {cls}{spec}{cite}")
    plain = engine_defaults(table, hw, float(hardware_profile.hbm_bytes), False)["max_num_seqs"]
    if given.get("max_num_seqs") is None and plain != out["max_num_seqs"][0]:  # SGLang: 48 only with speculation
        out["plain_max_num_seqs"] = (plain, f"{whose} on {cls} for a plain server{cite}")
    return out
