"""veloxquant.tune(): the tuner of `vq tune` on SmolLM2-135M (30 layers, 3 KV
heads, head_dim 64; models/SmolLM2-135M-Instruct.Q4_1.gguf, tools/fetch_model.sh).

Two real runs at the smallest budget that still measures: one 64-token window,
one key candidate (kivi2) beside f16, f16 values; measured from the f16 cache
(base="f16": 1 + 30 + 3 runs of the model, ~17 CPU-seconds) and from the
cheapest plan (base="cheapest": 2 + 30 + 3 runs). The same arguments through
`vq tune` (the binary at $VQ_BIN, else build/tools/vq) read the sensitivities
each run wrote and must write the same profile bytes."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import veloxquant as vq

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = pathlib.Path(os.environ.get("VQ_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
TEXT = ROOT / "data" / "pride_and_prejudice.txt"
VQ_BIN = pathlib.Path(os.environ.get("VQ_BIN", ROOT / "build" / "tools" / "vq"))
if not MODEL.exists():
    pytest.skip(f"model file {MODEL} not present (sh tools/fetch_model.sh)", allow_module_level=True)

# kivi2 keys (3 bits at 64 tokens) beside f16 values: 9.5 bits at the cheapest; one layer's keys back in f16
# (+13/60 bits); the checks at -0.5 and -0.25 bits fall below the cheapest plan and do not run
BUDGET = 9.74
ARGS = dict(keys="kivi2", values="f16", tokens=64, ctx=64, smooth=True, center_keys=True, base="f16")
CLI_ARGS = ["--keys", "kivi2", "--values", "f16", "--tokens", "64", "--ctx", "64", "--smooth", "--center-keys",
            "--base", "f16"]
# base cheapest: f16 is a key candidate only where named; the values' only candidate is f16
CHEAP_ARGS = dict(ARGS, keys="f16,kivi2", base="cheapest")
CHEAP_CLI_ARGS = ["--keys", "f16,kivi2", "--values", "f16", "--tokens", "64", "--ctx", "64", "--smooth",
                  "--center-keys", "--base", "cheapest"]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """The novel's last 4000 characters: enough for 64 tokens, quick to tokenize."""
    path = tmp_path_factory.mktemp("text") / "tail.txt"
    path.write_bytes(TEXT.read_bytes()[-4000:])
    return path


def tune_at_budget(tmp_path_factory, text, args):
    """A real run at BUDGET: the profile, the measurements file it wrote and the progress calls."""
    meas = tmp_path_factory.mktemp("tune") / "m.txt"
    steps = []
    p = vq.tune(MODEL, BUDGET, text, measurements=meas, progress=lambda *a: steps.append(a), **args)
    return p, meas, steps


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, text):
    return tune_at_budget(tmp_path_factory, text, ARGS)


@pytest.fixture(scope="module")
def tuned_cheapest(tmp_path_factory, text):
    return tune_at_budget(tmp_path_factory, text, CHEAP_ARGS)


def losses(meas, side):
    """The measurements file's rows of one side: [layer][candidate], "nan" as NaN."""
    return [[float(x) for x in ln.split()[2:]] for ln in meas.read_text().splitlines()
            if ln.startswith(side + " ") and ln.split()[1].isdigit()]


def test_tune_meets_the_budget(tuned, text):
    p, meas, steps = tuned
    assert isinstance(p, bytes) and p.measured and p.budget == BUDGET
    assert p.base == "f16" and p.base_kl == 0
    assert p.min_bits == pytest.approx(9.5) and p.min_bits <= p.bits <= BUDGET
    assert [k for k, _, _, _ in p.layers].count("f16") == 1 and {v for _, _, v, _ in p.layers} == {"f16"}
    assert [name for name, _ in p.keys] == ["f16", "kivi2"] and [name for name, _ in p.values] == ["f16"]
    # every layer's kivi2 keys measured (the file written): the one that costs the most stays f16
    lines = [ln.split() for ln in meas.read_text().splitlines() if ln.startswith("keys ")][1:]
    kl = [float(ln[3]) for ln in lines]
    assert len(kl) == 30 and min(kl) > 0
    assert [l for l in range(30) if p.layers[l][0] == "f16"] == [int(np.argmax(kl))]
    assert len(p.checks) == 3 and p.checks[0][0] == p.bits
    # every run announced, in order, before it ran
    total = 1 + 30 + 5  # announced: the checks below the cheapest plan are skipped
    assert [s[:2] for s in steps] == [(i, total) for i in range(total)]
    assert steps[0][2] == "f16 reference" and steps[1][2] == "layer 0 keys kivi2"
    # the profile loads into a cache of the model's shape, which stores at the bits the tuner promised
    c = vq.KVCache(30, 3, 64, n_q_heads=9, profile=p)
    assert c.method == "profile"
    rng = np.random.default_rng(0)
    s = c.add_sequence()
    for layer in range(30):
        k = rng.standard_normal((1, 3, 64, 64)).astype(np.float16)
        c.fit_transforms(layer, [s], k, k, rng.standard_normal((1, 9, 64, 64)).astype(np.float16))  # --smooth
        c.append(layer, [s], k, k)
    m = c.memory()
    assert m["bits_per_element"] <= BUDGET and m["bits_per_element"] == pytest.approx(p.bits, abs=1e-6)
    for layer, (keys, _, _, _) in enumerate(p.layers):
        assert c.layer_config(layer).key_method == ("f16" if keys == "f16" else "kivi")
    # a budget of the cheapest plan's bits as printed is that plan, not "no plan fits": the sum of the
    # parts' bits rounds above 9.5
    q = vq.tune(MODEL, 9.5, text, measurements=meas, **ARGS)
    assert q.kv == "kivi2/f16" and q.bits == pytest.approx(9.5, abs=1e-9)


def test_tune_from_the_cheapest_plan(tuned_cheapest, text):
    p, meas, steps = tuned_cheapest
    assert p.measured and p.base == "cheapest" and p.base_kl > 0
    assert p.min_bits == pytest.approx(9.5) and p.min_bits <= p.bits <= BUDGET
    # the reference, the cheapest plan (kivi2 keys, f16 values), then each layer's keys at f16 around it: the
    # values have no other candidate, nothing to measure
    total = 2 + 30 + 5
    assert [s[:2] for s in steps] == [(i, total) for i in range(total)]
    assert [s[2] for s in steps[:4]] == ["f16 reference", "cheapest plan", "layer 0 keys f16", "layer 1 keys f16"]
    # every part's loss at its cheapest candidate is the cheapest plan's KL (%.9e in the file)
    keys, values = losses(meas, "keys"), losses(meas, "values")
    assert len(keys) == len(values) == 30
    assert all(row[1] == pytest.approx(p.base_kl, rel=1e-9) for row in keys)
    assert all(row == [pytest.approx(p.base_kl, rel=1e-9)] for row in values)
    # one layer's keys back in f16 fits the budget: the layer whose f16 keys save the most from the base; the
    # plan is then one that was measured, and the runs are deterministic, so its check measures that loss again
    best = int(np.argmin([row[0] for row in keys]))
    assert keys[best][0] < p.base_kl
    assert [l for l in range(30) if p.layers[l][0] == "f16"] == [best]
    assert p.layers[best][1] == pytest.approx(keys[best][0], rel=1e-9)
    assert p.predicted_kl == pytest.approx(keys[best][0], rel=1e-9)
    assert p.measured_kl == pytest.approx(keys[best][0], rel=1e-9)
    # at the cheapest plan's bits, from the file: the plan is the base, predicted and measured its KL
    q = vq.tune(MODEL, p.min_bits, text, measurements=meas, **CHEAP_ARGS)
    assert not q.measured and q.kv == "kivi2/f16" and q.bits == pytest.approx(q.min_bits, abs=1e-12)
    assert q.base == "cheapest" and q.base_kl == pytest.approx(p.base_kl, rel=1e-9)
    assert q.predicted_kl == q.base_kl
    assert q.measured_kl == pytest.approx(p.base_kl, rel=1e-9)
    # the search from the same file: the cheapest plan's run, then one upgrade fits, so one round runs the two
    # best-ranked (the best is the allocation's plan, measured again) and the next finds none; not strictly
    # better, the allocation's plan stays
    s = vq.tune(MODEL, BUDGET, text, measurements=meas, search=2, **CHEAP_ARGS)
    assert (s.search_rounds, s.search_runs, s.chose_search) == (1, 3, False)
    assert s.searched[0] == pytest.approx(p.bits, abs=1e-12)
    assert s.searched[2] == pytest.approx(keys[best][0], rel=1e-9)
    assert bytes(s) == bytes(p) and s.measured_kl == pytest.approx(p.measured_kl, rel=1e-9)
    with pytest.raises(vq.InvalidArgumentError, match="search 9: expected 0"):
        vq.tune(MODEL, BUDGET, text, search=9, **CHEAP_ARGS)
    # the file is for its base only
    with pytest.raises(vq.InvalidArgumentError, match="measured from the cheapest plan, this run asks base f16"):
        vq.tune(MODEL, BUDGET, text, measurements=meas, **dict(CHEAP_ARGS, base="f16"))


@pytest.mark.parametrize("base", ["f16", "cheapest"])
def test_tune_same_profile_as_the_cli(base, tuned, tuned_cheapest, tmp_path, text):
    p, meas, _ = tuned if base == "f16" else tuned_cheapest
    if not VQ_BIN.exists():
        pytest.skip(f"no vq binary at {VQ_BIN} (set VQ_BIN)")
    out = tmp_path / "cli.vqprof"
    r = subprocess.run([str(VQ_BIN), "tune", "-m", str(MODEL), "--bits", str(BUDGET), "--text", str(text),
                        *(CLI_ARGS if base == "f16" else CHEAP_CLI_ARGS), "--measurements", str(meas), "-o", str(out),
                        "--json"], capture_output=True, text=True, env={**os.environ, "VQ_PROGRESS": "0"})
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == bytes(p)
    saved = tmp_path / "py.vqprof"
    p.save(saved)
    assert saved.read_bytes() == bytes(p)


def test_tune_bad_input(tmp_path, text):
    # the options' ranges and the files, before the model loads
    with pytest.raises(vq.InvalidArgumentError, match="'missing.gguf' is not a file"):
        vq.tune("missing.gguf", 3)
    with pytest.raises(vq.InvalidArgumentError, match="cannot read 'nope.txt'"):
        vq.tune(MODEL, 3, "nope.txt")
    with pytest.raises(vq.InvalidArgumentError, match=r"bits 17: expected bits per element in \(0, 16\]"):
        vq.tune(MODEL, 17, text)
    with pytest.raises(vq.InvalidArgumentError, match="ctx 65: must be even"):
        vq.tune(MODEL, 3, text, tokens=64, ctx=65)
    with pytest.raises(vq.InvalidArgumentError, match="kivi_arith"):
        vq.tune(MODEL, 3, text, kivi_arith="int4")
    with pytest.raises(vq.InvalidArgumentError, match="base 'x': expected f16 or cheapest"):
        vq.tune(MODEL, 3, text, base="x")
    with pytest.raises(vq.InvalidArgumentError, match="argument 'base': expected a str or None, got int"):
        vq.tune(MODEL, 3, text, base=3)
    with pytest.raises(vq.InvalidArgumentError, match="is not a model this runtime loads: .*not a GGUF file"):
        vq.tune(text, 3, text)
    # with the model: a budget below the cheapest plan, a candidate that is none (the C messages of vq tune,
    # tested there, name the keyword here)
    with pytest.raises(vq.InvalidArgumentError, match=r"bits 1.5: no plan of these candidates fits; the cheapest "
                       r"takes 9.500 bits"):
        vq.tune(MODEL, 1.5, text, **ARGS)
    with pytest.raises(vq.InvalidArgumentError, match="values: 'vecinfer2' is not a preset without fitted tables"):
        vq.tune(MODEL, 10, text, keys="kivi2", values="vecinfer2", tokens=64, ctx=64)

    # an exception in the progress callable stops the tuner before the model runs, and comes out as it was
    class Stop(Exception):
        pass

    def stop(done, total, step):
        raise Stop(step)

    with pytest.raises(Stop, match="f16 reference"):
        vq.tune(MODEL, BUDGET, text, progress=stop, **ARGS)
