"""A bounded fuzz run over every input kind: mutated config.json, hardware TOML, sweep TOML and
measurement CSV files, fed to the CLI in-process. Anything but exit 0 or exit 2 with one line on
stderr (a traceback, another exit code, a multi-line error) is a crash, recorded with its input.

    python tools/fuzz.py --seconds 180 --seed 0     # prints a summary and one JSON line

Mutations start from shipped files (presets, tests/data, data/measured): drop a key, set a key to a
hostile value (negative, zero, huge, NaN-like strings, wrong types, nested containers), duplicate or
truncate text, and for CSVs alter cells. Inputs are small, so every run stays within its time bound.
"""

import argparse
import contextlib
import io
import json
import pathlib
import random
import re
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specjax.cli import main  # noqa: E402
from specjax.inputs.ingest import REGISTRY as _FORMATS  # noqa: E402

HOSTILE = [-1, 0, 1, -3000, 10**15, 1e-300, 1e308, 2.5, "32", "false", True, None, [], {}, [1, 2], "", "x" * 300]


def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return '""'
    if isinstance(v, (list, dict)):
        return "[]" if isinstance(v, list) else "{}"
    return json.dumps(v) if isinstance(v, str) else repr(v)


def mutate_json(rng, cfg):
    cfg = dict(cfg)
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(list(cfg))
        if rng.random() < 0.3:
            cfg.pop(key)
        else:
            cfg[key] = rng.choice(HOSTILE)
    return json.dumps(cfg)


def mutate_toml(rng, text):
    lines = text.splitlines()
    kv = [i for i, ln in enumerate(lines) if "=" in ln and not ln.lstrip().startswith("#")]
    for _ in range(rng.randint(1, 3)):
        if not kv:
            break
        i = rng.choice(kv)
        key = lines[i].split("=", 1)[0].strip()
        r = rng.random()
        if r < 0.2:
            lines[i] = ""
        elif r < 0.9:
            lines[i] = f"{key} = {_toml_value(rng.choice(HOSTILE))}"
        else:
            lines.insert(i, lines[i])  # a duplicated key
    text = "\n".join(lines) + "\n"
    if rng.random() < 0.05:
        text = text[: rng.randint(0, len(text))]
    return text


def mutate_csv(rng, text):
    rows = text.splitlines()
    header, body = rows[0], rows[1:rng.randint(2, 12)]
    out = []
    for row in body:
        cells = row.split(",")
        for _ in range(rng.randint(0, 2)):
            j = rng.randrange(len(cells))
            cells[j] = str(rng.choice(["", "-1", "0", "nan", "inf", "1e308", "abc", "2.5", "h100-sxn", '"', "9" * 40]))
        out.append(",".join(cells))
    if rng.random() < 0.1:
        out = out * 3
    return "\n".join([header] + out) + "\n"


HOSTILE_TEXT = ["", "-1", "0", "nan", "inf", "1e308", "abc", "2.5", '"', "9" * 40, "null", "[]", "{}", "true"]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def mutate_lines(rng, text):
    """An engine log, metrics scrape or JSON-lines file with a few numbers, keys or lines damaged."""
    lines = text.splitlines()
    for _ in range(rng.randint(1, 4)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        r = rng.random()
        if r < 0.5:  # a number replaced by a hostile token
            nums = list(NUMBER.finditer(lines[i]))
            if nums:
                m = rng.choice(nums)
                lines[i] = lines[i][:m.start()] + rng.choice(HOSTILE_TEXT) + lines[i][m.end():]
        elif r < 0.7:
            lines[i] = lines[i][:rng.randrange(len(lines[i]) + 1)]  # truncated
        elif r < 0.85:
            del lines[i]
        else:
            lines.insert(i, lines[i])  # duplicated
    return "\n".join(lines) + ("\n" if rng.random() < 0.9 else "")


def cases(rng, tmp):
    """(label, argv) generators for each input kind, reading seeds from the shipped files."""
    models = sorted((ROOT / "specjax" / "presets" / "models").glob("*.json"))
    hws = sorted((ROOT / "specjax" / "presets" / "hardware").glob("*.toml"))
    specs = [ROOT / "tests" / "data" / "tiny.toml"]
    csvs = [ROOT / "data" / "measured" / "public.csv", ROOT / "data" / "measured" / "step_times.csv"]
    engines = sorted((ROOT / "tests" / "data" / "engines").iterdir()) + sorted(
        f for f in (ROOT / "tests" / "data" / "engine_samples").iterdir() if f.suffix != ".md")  # real output
    model = ["--target", "llama-3.1-8b", "--hardware", "h100-sxm", "--drafter", "eagle", "--draft",
             "eagle3-llama-3.1-8b"]
    while True:
        kind = rng.choice(["config", "draft", "hardware", "spec", "csv", "engine", "serve"])
        path = tmp / f"in-{rng.randrange(10**9)}"
        if kind in ("config", "draft"):
            cfg = json.loads(rng.choice(models).read_text())
            path = path.with_suffix(".json")
            path.write_text(mutate_json(rng, cfg))
            role = ["--target", str(path), "--drafter", "ngram"] if kind == "config" else [
                "--target", "llama-3.1-8b", "--drafter", "model", "--draft", str(path)]
            yield kind, ["point", *role, "--hardware", "h200", "--batch", rng.choice(["1", "64", "4096"]),
                         "--alpha", "0.7", "--engine", "roofline", "--ignore-memory", "--json"]
        elif kind == "hardware":
            path = path.with_suffix(".toml")
            path.write_text(mutate_toml(rng, rng.choice(hws).read_text()))
            yield kind, ["crossover", "--target", "llama-3.1-8b", "--hardware", str(path), "--drafter", "ngram",
                         "--alpha", "0.7", "--json"]
        elif kind == "spec":
            path = path.with_suffix(".toml")
            path.write_text(mutate_toml(rng, rng.choice(specs).read_text()))
            yield kind, ["sweep", str(path), "--out", str(tmp / f"out-{rng.randrange(10**9)}"), "--quiet", "--json"]
        elif kind == "engine":  # engine metrics, logs, stats and results -> ingest (with or without --format)
            src = rng.choice(engines)
            path = path.with_suffix(src.suffix)
            path.write_text(mutate_lines(rng, src.read_text()))
            extra = ["--format", rng.choice(list(_FORMATS))] if rng.random() < 0.3 else []
            yield kind, ["ingest", str(path), *extra, *model, "--k", "3", "--out", str(tmp / "ingest.csv"), "--json"]
        elif kind == "serve":  # serving flags, some hostile
            flags = {"--qps": rng.choice(["1", "0.001", "1e6", "0", "-1", "nan", "abc"]),
                     "--input-len": rng.choice(["1", "1024", "1e7", "0", "1e9"]),
                     "--output-len": rng.choice(["1", "128", "1e7", "0", "-5"]),
                     "--max-num-seqs": rng.choice(["1", "256", "0", "1e9", "2.5"]),
                     "--tpot-slo": rng.choice(["0.02", "1e-9", "0", "-1", "inf"])}
            argv = ["serve", *model, "--alpha", "0.7", "--k", "3", "--json"]
            for f, v in flags.items():
                if rng.random() < 0.6:
                    argv += [f, v]
            yield kind, argv
        else:
            path = path.with_suffix(".csv")
            path.write_text(mutate_csv(rng, rng.choice(csvs).read_text()))
            yield kind, ["validate", str(path), "--json"]


def run_one(argv):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:  # noqa: BLE001  (a crash is what we are looking for)
            return "crash", f"{type(e).__name__}: {e}"
    text = err.getvalue().strip()
    if code == 0:
        return "ok", ""
    if code == 2 and len(text.splitlines()) == 1 and "Traceback" not in text:
        return "refused", text
    return "crash", f"exit {code}: {text[-300:]}"


def main_():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    counts, crashes = {}, []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        for kind, argv in cases(rng, tmp):
            if time.perf_counter() - t0 > args.seconds:
                break
            verdict, detail = run_one(argv)
            counts.setdefault(kind, {}).setdefault(verdict, 0)
            counts[kind][verdict] += 1
            if verdict == "crash":
                named = [a for a in argv if a.startswith(str(tmp)) and pathlib.Path(a).is_file()]
                src = pathlib.Path(named[0]).read_text()[:2000] if named else " ".join(argv)
                crashes.append(dict(kind=kind, argv=argv, detail=detail, input=src))
    total = sum(sum(v.values()) for v in counts.values())
    for kind, v in sorted(counts.items()):
        print(f"{kind:<9} " + ", ".join(f"{k} {n}" for k, n in sorted(v.items())))
    for c in crashes[:10]:
        print(f"CRASH {c['kind']}: {c['detail']}")
    print(json.dumps(dict(inputs=total, crashes=len(crashes), seconds=args.seconds, seed=args.seed, counts=counts)))
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main_())
