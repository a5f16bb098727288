"""Hostile inputs against every entry point: one line on stderr naming the file/field, the value
and the allowed range; exit code 2; no traceback; no output file left behind.

Each case: (id, files to create, CLI arguments, expected substring of the message). `{d}` in
arguments and file contents is the case's temporary directory; outputs go to `{d}/out*`.
"""

import json

import pytest

from specjax.cli import main
from specjax.inputs.models import PRESET_DIR

POINT = ["point", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "8", "--draft-cost", "0.1",
         "--alpha", "0.7"]
SWEEP_BASE = ('hardware = ["h100-sxm"]\n[[pairs]]\ntarget = "llama-3.1-8b"\ndrafter = "ngram"\n'
              "[fixed]\nalpha = 0.6\n[axes]\nbatch = [1, 8]\n")
HW_OK = ('name = "x"\nhbm_bytes_per_s = 2e12\nhbm_bytes = 8e10\nlink_bytes_per_s = 4e11\n'
         "[flops_per_s]\nbf16 = 5e14\n")
CSV_HEAD = ("series,target,drafter,draft,hardware,tp,batch,k,acceptance_rate,accepted_length,context,weight_dtype,"
            "measured_speedup,metric,approximate,source_url\n")
CSV_OK = "A,llama-3.1-8b,ngram,,h100-sxm,1,4,3,0.5,,500,bf16,1.2,throughput,no,u\n"
LLAMA = json.loads((PRESET_DIR / "llama-3.1-8b.json").read_text())


def cfg(**kw):
    c = {k: v for k, v in LLAMA.items() if k != "_specjax"}
    c.update(kw)
    return json.dumps({k: v for k, v in c.items() if v is not None})


def moe_cfg(**kw):
    base = json.loads(cfg())
    base.update(model_type="mixtral", num_local_experts=8, num_experts_per_tok=2, intermediate_size=1001,
                num_attention_heads=8, num_key_value_heads=8, head_dim=512)
    base.update(kw)
    return json.dumps(base)


def sweep_case(text, expect, name="s.toml"):
    return ({name: text}, ["sweep", "{d}/" + name, "--out", "{d}/out"], expect)


def with_point(extra, expect):
    """POINT with the options of `extra` replacing its own (an option may be given once)."""
    given = {a for a in extra if a.startswith("--")}
    base = [a for i, a in enumerate(POINT) if a not in given and not (i and POINT[i - 1] in given)]
    return ({}, base + extra, expect)


def hw_case(text, expect, name="gpu.toml"):
    return ({name: text}, ["point", "--target", "llama-3.1-8b", "--hardware", "{d}/" + name, "--batch", "8",
                           "--draft-cost", "0.1", "--alpha", "0.7"], expect)


def cfg_case(text, expect, extra=(), name="config.json"):
    return ({name: text}, ["point", "--target", "{d}/" + name, "--hardware", "h100-sxm", "--batch", "8",
                           "--draft-cost", "0.1", "--alpha", "0.7", *extra], expect)


def csv_case(text, expect, cmd="validate"):
    args = [cmd, "{d}/m.csv"] + (["--out", "{d}/out.csv"] if cmd == "validate" else ["--out", "{d}/out.toml"])
    return ({"m.csv": text}, args, expect)


CASES = {
    # CLI flags
    "alpha-high": with_point(["--alpha", "1.3"], "alpha=1.3; expected 0 <= alpha <= 1"),
    "target-dev-zero": with_point(["--target", "/dev/zero"], "model config '/dev/zero' is more than 4,194,304 bytes"),
    "hardware-dev-zero": with_point(["--hardware", "/dev/zero"], "hardware file '/dev/zero' is more than"),
    "alpha-negative": with_point(["--alpha", "-0.1"], "alpha=-0.1"),
    "alpha-nan": with_point(["--alpha", "nan"], "alpha=nan"),
    "alpha-inf": with_point(["--alpha", "inf"], "alpha=inf"),
    "alpha-text": with_point(["--alpha", "high"], "'--alpha'"),
    "k-negative": with_point(["--k", "-1"], "k=-1; expected 0 <= k <= 64"),
    "k-huge": with_point(["--k", "65"], "k=65"),
    "k-fraction": with_point(["--k", "2.5"], "'--k'"),
    "batch-zero": with_point(["--batch", "0"], "batch=0.0; expected 1 <= batch <= 1e8"),
    "batch-negative": with_point(["--batch", "-3"], "batch=-3.0"),
    "batch-nan": with_point(["--batch", "nan"], "batch=nan"),
    "batch-huge": with_point(["--batch", "1e12"], "batch=1000000000000.0"),
    "context-negative": with_point(["--context", "-1"], "context=-1.0"),
    "context-inf": with_point(["--context", "inf"], "context=inf"),
    "tp-zero": with_point(["--tp", "0"], "tp=0"),
    "tp-heads": with_point(["--tp", "3"], "tp=3; expected a divisor of the 32 attention heads of llama-3.1-8b"),
    "ep-dense-target": with_point(["--ep", "2"], "ep=2; expected 1: llama-3.1-8b has no routed experts"),
    "ep-zero": with_point(["--ep", "0"], "ep=0; expected an integer 1 <= ep <= 4096"),
    "dp-attention-fraction": with_point(["--dp-attention", "1.5"], "'--dp-attention'"),
    "draft-tp-ratio": with_point(["--draft-tp", "1"], "draft_tp=1 is for a drafter that runs a model"),
    "expert-imbalance-low": with_point(["--expert-imbalance", "0.9"], "expert_imbalance=0.9; expected 1 <="),
    "memory-fraction": with_point(["--memory-fraction", "1.5"], "memory_fraction=1.5; expected 0 < u <= 1"),
    "tau-low": ({}, POINT[:-2] + ["--accepted-length", "0.5"], "accepted_length=0.5; expected 1 <= tau <= 65"),
    "tau-above-k+1": ({}, POINT[:-2] + ["--accepted-length", "5", "--k", "3"], "accepted_length=5.0"),
    "alpha-and-tau": with_point(["--accepted-length", "2"], "give exactly one of alpha, accepted_length"),
    "neither": ({}, POINT[:-2], "give exactly one of alpha, accepted_length"),
    "drafter-unknown": with_point(["--drafter", "medusa"], "drafter='medusa'; expected one of"),
    "eagle-no-head": with_point(["--drafter", "eagle"], "drafter='eagle' needs a draft model or head"),
    "ratio-no-cost": ({}, POINT[:5] + ["--batch", "8", "--alpha", "0.5"],
                      "drafter='ratio' (the default) needs draft_cost"),
    "draft-cost-high": with_point(["--draft-cost", "11"], "draft_cost=11.0"),
    "target-unknown": ({}, ["point", "--target", "lama-3.1-8b", "--hardware", "h100-sxm", "--batch", "1",
                            "--alpha", "0.5", "--draft-cost", "0.1"], "unknown model 'lama-3.1-8b'; did you mean"),
    "hardware-unknown": with_point(["--hardware", "h10"], "unknown hardware 'h10'"),
    "draft-unknown": with_point(["--drafter", "model", "--draft", "llama-0b"], "unknown model 'llama-0b'"),
    "compute-dtype-missing": with_point(["--hardware", "a100-80gb", "--compute-dtype", "fp8"],
                                        "compute_dtype='fp8'; expected a dtype with a peak on a100-80gb"),
    "compute-dtype-bogus": with_point(["--compute-dtype", "fp3"], "compute_dtype='fp3'"),
    "weight-dtype-bogus": with_point(["--weight-dtype", "fp7"], "weight_dtype='fp7'; expected one of"),
    "kv-dtype-bogus": with_point(["--kv-dtype", "int3"], "kv_dtype='int3'"),
    "roofline-bogus": with_point(["--roofline", "sum"], "roofline='sum'; expected one of operator, pass"),
    "does-not-fit": ({}, ["point", "--target", "deepseek-v3", "--hardware", "h100-sxm", "--batch", "1", "--alpha",
                          "0.5", "--drafter", "mtp"], "with tp=1) do not fit in 80 GB"),
    "mtp-without-layers": with_point(["--drafter", "mtp"], "a target with MTP layers"),
    "crossover-batch-max": ({}, ["crossover", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--alpha", "0.5",
                                 "--draft-cost", "0.1", "--batch-max", "1"],
                            "batch_max=1.0; expected 2 <= batch_max <= 1e8"),
    "optimize-k-max": ({}, ["optimize", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--alpha", "0.5",
                            "--draft-cost", "0.1", "--k-max", "0"], "'--k-max'"),
    "optimize-method": ({}, ["optimize", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--alpha", "0.5",
                             "--draft-cost", "0.1", "--method", "newton"],
                        "method='newton'; expected one of optax, brute"),
    "spec-k-method": sweep_case(SWEEP_BASE + "[optimize]\nmethod = \"adam\"\n", "optimize.method='adam'"),
    "optimize-batch": ({}, ["optimize", "--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--alpha", "0.5",
                            "--draft-cost", "0.1", "--batch", "0"], "batch=0.0; expected 1 <= batch <= 1e8"),
    "plot-kind": ({}, ["plot", "bars", "--out", "{d}/out"], "kind='bars'"),
    # sweep TOML
    "spec-unknown-key": sweep_case("colour = 1\n" + SWEEP_BASE, "unknown top-level key 'colour'"),
    "spec-unknown-axis": sweep_case(SWEEP_BASE + "batchsize = [1]\n", "unknown axis 'batchsize'"),
    "spec-empty-list": sweep_case(SWEEP_BASE.replace("[1, 8]", "[]"), "axes.batch=[]"),
    "spec-negative-batch": sweep_case(SWEEP_BASE.replace("[1, 8]", "[-1, 8]"), "axes.batch=-1"),
    "spec-inverted": sweep_case(SWEEP_BASE.replace("[1, 8]", "{ start = 8, stop = 1, num = 3 }"), "inverted"),
    "spec-num-zero": sweep_case(SWEEP_BASE.replace("[1, 8]", "{ start = 1, stop = 8, num = 0 }"), "axes.batch.num=0"),
    "spec-log-zero": sweep_case(SWEEP_BASE + "context = { start = 0, stop = 8, num = 3, scale = \"log\" }\n",
                                "axes.context.start=0 in {d}/s.toml; expected > 0 for scale = 'log'"),
    "spec-wrong-type": sweep_case(SWEEP_BASE.replace("[1, 8]", '"8"'), "axes.batch='8'"),
    "spec-nan": sweep_case(SWEEP_BASE.replace("[1, 8]", "[1, nan]"), "axes.batch=nan"),
    "spec-alpha": sweep_case(SWEEP_BASE.replace("alpha = 0.6", "alpha = 1.2"), "fixed.alpha=1.2"),
    "spec-float32-duplicates": sweep_case(SWEEP_BASE.replace("batch = [1, 8]", "batch = [1, 1.00000001]"),
                                          "expected values distinct in float32"),
    "coordinator-port": ({"s.toml": SWEEP_BASE}, ["sweep", "{d}/s.toml", "--out", "{d}/out", "--num-processes", "2",
                                                  "--coordinator", "localhost:99999"],
                         "coordinator='localhost:99999'; expected host:port with a port in [1, 65535]"),
    "plot-out-under-a-file": ({"f": "x"}, ["plot", "speedup", "--target", "llama-3.1-8b", "--hardware", "h100-sxm",
                                           "--alpha", "0.7", "--draft-cost", "0.1", "--out", "{d}/f/fig"],
                              "'{d}/f' is a file, not a directory"),
    "plot-from-empty-dir": ({"empty/.keep": ""}, ["plot", "speedup", "--from", "{d}/empty", "--out", "{d}/fig"],
                            "no sweep results in '{d}/empty'"),
    "spec-no-alpha": sweep_case(SWEEP_BASE.replace("alpha = 0.6", ""), "give exactly one of alpha"),
    "spec-both": sweep_case(SWEEP_BASE.replace("alpha = 0.6", "alpha = 0.6\nbatch = 4"), "batch is both"),
    "spec-chunk": sweep_case("chunk_size = -5\n" + SWEEP_BASE, "chunk_size=-5"),
    "spec-no-pairs": sweep_case(SWEEP_BASE.replace('[[pairs]]\ntarget = "llama-3.1-8b"\ndrafter = "ngram"\n', ""),
                                "pairs=None in {d}/s.toml; expected a non-empty array"),
    "spec-pair-preset": sweep_case(SWEEP_BASE.replace('"llama-3.1-8b"', '"llama-8b"'), "unknown model 'llama-8b'"),
    "spec-pair-key": sweep_case(SWEEP_BASE.replace('drafter = "ngram"', 'drafter = "ngram"\ncolour = 1'),
                                "unknown key in pairs[0] 'colour'"),
    "spec-hardware-type": sweep_case(SWEEP_BASE.replace('["h100-sxm"]', "3"), "hardware=3"),
    "spec-reduce": sweep_case(SWEEP_BASE + "[reduce]\nkind = \"mean\"\n", "reduce.kind='mean'"),
    "spec-max-speedup": sweep_case(SWEEP_BASE.replace("batch = [1, 8]", "context = [1]").replace(
        "alpha = 0.6", "alpha = 0.6\nbatch = 2") + "[reduce]\nkind = \"max_speedup\"\n", "needs a batch axis"),
    "spec-sensitivity": sweep_case(SWEEP_BASE + "[sensitivity]\n", "needs reduce.kind = 'crossover'"),
    "spec-truncated": sweep_case(SWEEP_BASE[:40], "malformed TOML"),
    "spec-not-utf8": sweep_case(b"name = \"\xff\xfe\"\n" + SWEEP_BASE.encode(), "is not UTF-8 text"),
    "spec-huge": sweep_case("# " + "x" * (1 << 20) + "\n" + SWEEP_BASE, "expected at most 1,048,576"),
    "spec-missing": ({}, ["sweep", "{d}/nope.toml", "--out", "{d}/out"], "sweep spec '{d}/nope.toml' not found"),
    "spec-directory": ({"dir/x": "1"}, ["sweep", "{d}/dir", "--out", "{d}/out"], "is a directory"),
    "spec-tp": sweep_case(SWEEP_BASE.replace("alpha = 0.6", "alpha = 0.6\ntp = 3"), "tp=3"),
    # model config.json
    "config-truncated": cfg_case(cfg()[:100], "malformed JSON"),
    "config-missing-key": cfg_case(cfg(num_hidden_layers=None), "missing required key 'num_hidden_layers'"),
    "config-negative": cfg_case(cfg(hidden_size=-4096), "hidden_size=-4096 in {d}/config.json; expected an "
                                "integer 1 <= hidden_size <= 1048576"),
    "config-string": cfg_case(cfg(num_attention_heads="32"), "num_attention_heads='32'"),
    "config-array": cfg_case("[1, 2, 3]", "must hold a JSON object"),
    "config-not-utf8": cfg_case(b"\xff" + cfg().encode(), "is not UTF-8 text"),
    "config-huge": cfg_case(cfg(notes="x" * (5 << 20)), "expected at most 4,194,304"),
    "config-kv-heads": cfg_case(cfg(num_key_value_heads=7),
                                "num_key_value_heads=7 in {d}/config.json; expected a divisor"),
    "config-layer-types": cfg_case(cfg(layer_types=["full_attention"] * 3), "one entry per layer (32)"),
    "config-top-k": cfg_case(moe_cfg(num_experts_per_tok=9),
                             "num_experts_per_tok=9 in {d}/config.json; expected <= number of experts"),
    "config-expert-tp": cfg_case(moe_cfg(), "tp=8; expected a divisor of the expert width 1001", ["--tp", "8"]),
    # hardware TOML
    "hw-negative": hw_case(HW_OK.replace("2e12", "-2e12"), "hbm_bytes_per_s=-2000000000000.0"),
    "hw-no-flops": hw_case(HW_OK.split("[flops")[0], "missing required key 'flops_per_s'"),
    "hw-unknown-key": hw_case("colour = 1\n" + HW_OK, "unknown hardware key 'colour'"),
    "hw-string": hw_case(HW_OK.replace("8e10", '"80 GB"'), "hbm_bytes='80 GB'"),
    "hw-tflops": hw_case(HW_OK.replace("5e14", "989"), "flops_per_s.bf16=989"),
    "hw-efficiency": hw_case(HW_OK.replace("[flops", "hbm_efficiency = 1.5\n[flops"),
                             "hbm_efficiency is an engine term"),
    "hw-dtype": hw_case(HW_OK + "fp2 = 1e15\n", "unknown compute dtype in [flops_per_s] 'fp2'"),
    "hw-malformed": hw_case("name = \n", "malformed TOML"),
    "hw-not-utf8": hw_case(b"name = \"\xff\"\n" + HW_OK.encode(), "is not UTF-8 text"),
    "hw-nan": hw_case(HW_OK.replace("4e11", "nan"), "link_bytes_per_s=nan"),
    # measurement CSV
    "csv-alpha": csv_case(CSV_HEAD + CSV_OK.replace(",0.5,", ",1.5,"), "line 2, column acceptance_rate: '1.5'"),
    "csv-batch": csv_case(CSV_HEAD + CSV_OK + CSV_OK.replace(",4,3,", ",x,3,"), "line 3, column batch: 'x'"),
    "csv-tau": csv_case(CSV_HEAD + CSV_OK.replace(",0.5,,", ",,9,"), "column accepted_length: '9'"),
    "csv-target": csv_case(CSV_HEAD + CSV_OK.replace("llama-3.1-8b", "llama"), "column target: 'llama'"),
    "csv-missing-col": csv_case(CSV_HEAD.replace(",metric", ""), "missing column 'metric'"),
    "csv-extra-col": csv_case(CSV_HEAD.strip() + ",colour\n" + CSV_OK.strip() + ",red\n", "unknown column 'colour'"),
    "csv-not-utf8": csv_case(CSV_HEAD.encode() + b"\xff\n", "is not UTF-8 text"),
    "csv-empty": csv_case(CSV_HEAD, "no data rows"),
    "csv-speedup": csv_case(CSV_HEAD + CSV_OK.replace(",1.2,", ",-1.2,"), "column measured_speedup: '-1.2'"),
    "csv-ragged": csv_case(CSV_HEAD + "A,llama-3.1-8b\n", "line 2, column hardware: ''"),
    "csv-calibrate": csv_case(CSV_HEAD + CSV_OK.replace(",0.5,", ",2,"), "column acceptance_rate: '2'", "calibrate"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input(case, tmp_path, capsys):
    """Each case of the catalogue (over 100: CLI flags, sweep TOML, config.json, hardware TOML, measurement
    CSV) is refused with exit code 2 and one `specjax: error:` line that says what is wrong."""
    files, args, expect = CASES[case]
    d = str(tmp_path)
    for name, content in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
    with pytest.raises(SystemExit) as e:
        main([a.replace("{d}", d) for a in args])
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("specjax: error: ") and expect.replace("{d}", d) in lines[0], lines[0]
    assert not list(tmp_path.glob("out*")), "no output may be left behind"


def test_spec_name_is_text_not_rich_markup(tmp_path, capsys):
    """A spec named "[/]" broke the progress bar (rich read it as a closing markup tag)."""
    import pathlib

    src = (pathlib.Path(__file__).parent / "data" / "tiny.toml").read_text().replace('name = "tiny"', 'name = "[/]"')
    path = tmp_path / "s.toml"
    path.write_text(src)
    with pytest.raises(SystemExit) as e:
        main(["sweep", str(path), "--out", str(tmp_path / "o")])
    out = capsys.readouterr()
    assert e.value.code == 0 and "Traceback" not in out.err, out.err[-500:]
    assert "[/]:" in out.out


def test_inputs_the_fuzz_run_found(tmp_path, capsys):
    """Crashes `tools/fuzz.py` found (each now one line, exit 2): a list where a config table belongs, a
    number as a pair's target, names longer than the file system allows, a huge tp beside a valid row."""
    import json as _json
    import pathlib

    def refused(args, text):
        with pytest.raises(SystemExit) as e:
            main(args)
        err = capsys.readouterr().err
        assert e.value.code == 2 and text in err and len(err.strip().splitlines()) == 1, err

    root = pathlib.Path(__file__).parents[1]
    cfg = _json.loads((PRESET_DIR / "llama-3.1-8b.json").read_text())
    for bad in ([1], "fp8", {"quant_method": "fp8", "modules_to_not_convert": 3}):
        p = tmp_path / "c.json"
        p.write_text(_json.dumps({**cfg, "quantization_config": bad}))
        refused(["point", "--target", str(p), "--hardware", "h200", "--batch", "1", "--alpha", "0.7", "--drafter",
                 "ngram"], "quantization_config")
    tiny = (root / "tests" / "data" / "tiny.toml").read_text()
    for old, new, msg in (('target = "gpt-oss-20b"', "target = 3", "pairs[0].target=3"),
                          ('draft = "eagle3-llama-3.1-8b"', "draft = 2.5", "pairs[1].draft=2.5"),
                          ('target = "gpt-oss-20b"', f'target = "{"x" * 300}"', "at most 255 characters"),
                          ('engine = "roofline"', f'engine = "{"x" * 300}"', "unknown engine"),
                          ('hardware = ["h100-sxm", "mi300x"]', f'hardware = ["{"x" * 300}"]', "hardware='xxx")):
        s = tmp_path / "s.toml"
        s.write_text(tiny.replace(old, new))
        refused(["sweep", str(s), "--out", str(tmp_path / "o"), "--dry-run"], msg)
    rows = (root / "data" / "measured" / "public.csv").read_text().splitlines()[:3]
    cells = rows[2].split(",")
    cells[5] = "9" * 40  # tp
    (tmp_path / "m.csv").write_text("\n".join(rows[:2] + [",".join(cells)]) + "\n")
    refused(["validate", str(tmp_path / "m.csv"), "--json"], "column tp")
