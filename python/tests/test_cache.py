"""KVCache (vq_cache) from Python: every preset runs; the f16 and KIVI caches
against float64 references built from the codec functions; sequences (fork,
truncate, remove), memory report, errors that change nothing."""

import dataclasses
import math

import numpy as np
import pytest

import veloxquant as vq
from conftest import np_
import ref


def _kv(rng, n_seq, hkv, n, d):
    return (rng.standard_normal((n_seq, hkv, n, d)).astype(np.float32),
            rng.standard_normal((n_seq, hkv, n, d)).astype(np.float32))


def _f16(x):
    return x.astype(np.float16).astype(np.float64)


def test_presets_listed():
    names = [p["name"] for p in vq.presets()]
    for want in ("f16", "kivi2", "kivi4", "turbo3", "rabitq", "qjl"):
        assert want in names
    lc = vq.LayerConfig.preset("kivi2", 64)
    assert lc.key_method == "kivi" and lc.key_bits == 2 and lc.value_method == "kivi"
    with pytest.raises(vq.InvalidArgumentError, match="nope"):
        vq.LayerConfig.preset("nope", 64)


@pytest.mark.parametrize("Sq,causal", [(1, False), (5, True)])
def test_f16_cache_is_exact_attention(fw, rng, Sq, causal):
    # two sequences of different lengths, GQA 3:1, appended in two steps
    L, hkv, hq, d = 2, 2, 6, 64
    c = vq.KVCache(L, hkv, d, n_q_heads=hq, method="f16")
    s = [c.add_sequence(), c.add_sequence()]
    k1, v1 = _kv(rng, 2, hkv, 37, d)
    c.append(1, s, fw(k1), fw(v1))
    k2, v2 = _kv(rng, 1, hkv, 11, d)
    c.append(1, s[1:], fw(k2), fw(v2))
    assert (c.length(s[0], 1), c.length(s[1], 1), c.length(s[0], 0)) == (37, 48, 0)
    q = rng.standard_normal((2, hq, Sq, d)).astype(np.float32)
    lse = fw.empty_poisoned((2, hq, Sq), np.float32)
    out = c.attend(1, s, fw(q), causal=causal, lse_out=lse)
    assert fw.is_native(out)
    for i, (k, v) in enumerate([(k1[0:1], v1[0:1]), (np.concatenate([k1[1:2], k2], 2), np.concatenate([v1[1:2], v2], 2))]):
        want = ref.attention(q[i:i + 1], _f16(k), _f16(v), 1 / math.sqrt(d), causal=causal)
        assert np.abs(np_(out)[i:i + 1] - want).max() < 2e-5 * np.abs(v).max()
    assert np.all(np.isfinite(np_(lse)))


def test_kivi_cache_matches_the_codec_functions(rng):
    # KIVI-2 keys per channel over groups of 32 tokens, values per token over
    # 32 channels, f16 parameters, the incomplete group kept in f16: the cache
    # must agree with the same pipeline built from the codec functions.
    L, hkv, hq, d, n, g = 1, 2, 4, 64, 77, 32
    c = vq.KVCache(L, hkv, d, n_q_heads=hq, method="kivi2")
    s = c.add_sequence()
    k, v = _kv(rng, 1, hkv, n, d)
    for t in range(0, n, 10):  # token-chunk appends give the same cache as one append
        c.append(0, [s], k[:, :, t:t + 10], v[:, :, t:t + 10])
    q = rng.standard_normal((1, hq, 1, d)).astype(np.float32)
    out = c.attend(0, [s], q, kivi_arith="f32")  # the float path: within f32 rounding
    n_enc = n // g * g
    k16, v16 = k.astype(np.float16), v.astype(np.float16)
    kc, ks, kz = vq.kivi_quantize_keys(np.ascontiguousarray(k16[:, :, :n_enc]), 2, g, packed=True,
                                         param_dtype="float16")
    vc, vs, vz = vq.kivi_quantize_values(np.ascontiguousarray(v16[:, :, :n_enc]), 2, g, packed=True,
                                           param_dtype="float16")
    k_hat = np.concatenate([vq.kivi_dequantize_keys(kc, ks, kz, 2, g), k16[:, :, n_enc:]], 2)
    v_hat = np.concatenate([vq.kivi_dequantize_values(vc, vs, vz, 2, g, head_dim=d), v16[:, :, n_enc:]], 2)
    want = ref.attention(q, k_hat, v_hat, 1 / math.sqrt(d))
    assert np.abs(out - want).max() < 1e-3 * np.abs(v_hat).max()


def test_kivi_arith_choices(rng):
    # "auto" is the integer arithmetic where the layout allows (2-bit, D 128:
    # int8 query scores and int8 value weights), close to the float path but
    # not equal to it; a name outside the three is refused.
    hkv, hq, d, n = 2, 4, 128, 200
    c = vq.KVCache(1, hkv, d, n_q_heads=hq, method="kivi2")
    s = c.add_sequence()
    k, v = _kv(rng, 1, hkv, n, d)
    c.append(0, [s], k, v)
    q = rng.standard_normal((1, hq, 1, d)).astype(np.float32)
    auto, f32, int8 = (c.attend(0, [s], q, kivi_arith=a) for a in ("auto", "f32", "int8"))
    assert np.array_equal(auto, int8)
    assert not np.array_equal(auto, f32)
    assert np.abs(auto - f32).max() < 0.06 * np.abs(v).max()  # test_kivi_arith.c's bound
    with pytest.raises(vq.InvalidArgumentError, match="kivi_arith"):
        c.attend(0, [s], q, kivi_arith="int4")


NAMED = ("quality-4bit", "balanced-3bit", "compact-2.5bit")


def test_named_presets_listed_first():
    ps = vq.presets()
    assert tuple(p["name"] for p in ps[:3]) == NAMED
    for p in ps:
        assert p["recipe"] == (p["name"] in NAMED)
        if p["recipe"]:
            assert p["sink_tokens"] == 4 and p["center_keys"] and p["center_values"] and p["smooth"]
            assert p["window"] in ("turbo8", "turbo6") and 2.5 < p["bits"] < 4.2
        else:
            assert p["sink_tokens"] == 0 and not p["smooth"] and p["window"] == "f16" and p["bits"] == 0


@pytest.mark.parametrize("name", NAMED)
def test_named_preset_is_its_kwargs(rng, name):
    # KVCache(method=NAME) is the cache its dict in presets() spells out, bit
    # for bit: the same layer configs, sink, transforms and window
    p = next(p for p in vq.presets() if p["name"] == name)
    L, hkv, hq, d, n = 2, 2, 4, 64, 300
    k, v = _kv(rng, 1, hkv, n, d)
    q = rng.standard_normal((1, hq, n, d)).astype(np.float32)
    named = vq.KVCache(L, hkv, d, n_q_heads=hq, method=name)
    spelled = vq.KVCache(L, hkv, d, n_q_heads=hq, layers=[name] * L, sink_tokens=p["sink_tokens"],
                         center_keys=p["center_keys"], center_values=p["center_values"], smooth=p["smooth"],
                         residual_tokens=p["residual_tokens"], window=p["window"])
    assert named.smooth and named.config() == spelled.config()
    outs = []
    for c in (named, spelled):
        s = c.add_sequence()
        if c is named:  # smooth's key scales come from the first chunk's queries
            with pytest.raises(vq.InvalidArgumentError, match="scale"):
                c.append(0, [s], k, v)
        for layer in range(L):
            c.fit_transforms(layer, [s], k, v, q)
            c.append(layer, [s], k, v)
        outs.append(c.attend(1, [s], q[:, :, -1:]))
        assert c.transforms(s, 1)["smooth"] and c.config()["sink_tokens"] == 4
    assert np.array_equal(outs[0], outs[1])
    assert named.memory()["tokens"] == L * n
    # what the caller sets stays the caller's
    own = vq.KVCache(L, hkv, d, n_q_heads=hq, method=name, sink_tokens=2, residual_tokens=8, center_keys=True)
    assert own.config()["sink_tokens"] == 2 and own.config()["residual_tokens"] == 8 and not own.smooth
    with pytest.raises(vq.InvalidArgumentError, match="unknown preset 'balanced-3bits'"):
        vq.KVCache(L, hkv, d, method="balanced-3bits")


@pytest.mark.parametrize("preset", [p["name"] for p in vq.presets() if not p["needs_tables"] and not p["recipe"]])
def test_every_preset_runs_and_is_close(rng, preset):
    # residual_tokens 16: the f16 window is merged with the pages
    hkv, hq, d, n = 2, 4, 64, 300
    k, v = _kv(rng, 1, hkv, n, d)
    q = (2 * rng.standard_normal((1, hq, 1, d))).astype(np.float32)  # score std 2: a peaked softmax
    want = ref.attention(q, k, v, 1 / math.sqrt(d))
    c = vq.KVCache(1, hkv, d, n_q_heads=hq, method=preset, residual_tokens=16)
    s = c.add_sequence()
    c.append(0, [s], k, v)
    out = c.attend(0, [s], q)
    rel = np.linalg.norm(out - want) / np.linalg.norm(want)
    m = c.memory()
    assert m["tokens"] == n and m["sequences"] == 1 and m["total_bytes"] > 0
    uniform = np.repeat(v.mean(2, keepdims=True), hq // hkv, 1)
    rel_uniform = np.linalg.norm(uniform - want) / np.linalg.norm(want)
    if preset == "f16":
        assert rel < 1e-3, rel
    elif preset.startswith(("rabitq", "qjl")):
        # 1-bit keys at D = 64: the score estimate's noise is as large as the
        # scores' spread, so only a sanity bound (a wrong scale or merge gives > 2)
        assert rel < 1.5 * rel_uniform, (preset, rel, rel_uniform)
    else:
        # 2..4-bit keys still steer attention: closer than keyless attention
        assert rel < rel_uniform, (preset, rel, rel_uniform)
    # every token in the f16 window: the exact f16 attention, whatever the method
    # (CommVQ and RaBitQ layers ignore the window: header, section 5)
    c2 = vq.KVCache(1, hkv, d, n_q_heads=hq, method=preset, residual_tokens=n)
    s2 = c2.add_sequence()
    c2.append(0, [s2], k, v)
    if preset.startswith(("commvq", "rabitq")):
        assert c2.memory()["residual_bytes"] == 0
    else:
        assert c2.memory()["code_bytes"] == 0
        want16 = ref.attention(q, _f16(k), _f16(v), 1 / math.sqrt(d))
        assert np.abs(c2.attend(0, [s2], q) - want16).max() < 2e-5 * np.abs(v).max()


def test_sequences_fork_truncate_remove(fw, rng):
    hkv, d = 1, 32
    c = vq.KVCache(1, hkv, d, method="f16")
    a = c.add_sequence()
    k, v = _kv(rng, 1, hkv, 40, d)
    c.append(0, [a], fw(k), fw(v))
    b = c.fork(a)
    assert c.length(b, 0) == 40
    c.truncate(b, 25)
    assert (c.length(a, 0), c.length(b, 0)) == (40, 25)
    q = rng.standard_normal((1, 1, 1, d)).astype(np.float32)
    ob = np_(c.attend(0, [b], fw(q)))
    want = ref.attention(q, _f16(k[:, :, :25]), _f16(v[:, :, :25]), 1 / math.sqrt(d))
    assert np.abs(ob - want).max() < 2e-5 * 4
    c.remove(b)
    assert c.length(b, 0) == -1
    with pytest.raises(vq.InvalidArgumentError, match=str(b)):
        c.remove(b)


def test_errors_change_nothing(fw, rng):
    hkv, d = 2, 32
    c = vq.KVCache(2, hkv, d, method="kivi4")
    s = c.add_sequence()
    k, v = _kv(rng, 1, hkv, 10, d)
    c.append(0, [s], fw(k), fw(v))
    bad = fw(rng.standard_normal((1, hkv, 10, d + 8)).astype(np.float32))
    with pytest.raises(vq.InvalidArgumentError) as e:
        c.append(0, [s], bad, bad)
    assert "vq_cache_append" in str(e.value)
    assert c.length(s, 0) == 10
    with pytest.raises(vq.InvalidArgumentError, match="layer"):
        c.append(5, [s], fw(k), fw(v))
    out = fw.empty_poisoned((1, 2, 1, d), np.float32)
    with pytest.raises(vq.InvalidArgumentError):
        c.attend(0, [s + 100], fw(np.zeros((1, 2, 1, d), np.float32)), out=out)
    assert np.all(np.isnan(np_(out)))
    with pytest.raises(vq.InvalidArgumentError, match="head_dim|D"):
        vq.KVCache(1, 1, 30)


def test_per_layer_methods(rng):
    c = vq.KVCache(3, 1, 64, layers=["f16", "kivi2", vq.LayerConfig.preset("turbo3", 64)], f16_layers=[1])
    assert [c.layer_config(i).key_method for i in range(3)] == ["f16", "f16", "turbo"]


def test_wide_channels_and_f16_value_scales(rng):
    # fewer wide KIVI_MIX key channels and f16 TurboQuant value scales: fewer bytes, the same fields back
    lc = vq.LayerConfig.preset("kivimix-turbo2", 64)
    lc.key_group_size = 32
    small = dataclasses.replace(lc, key_wide_channels=20, value_scale_f16=True)
    caches = [vq.KVCache(1, 2, 64, n_q_heads=4, layers=[x]) for x in (lc, small)]
    k, v = _kv(rng, 1, 2, 64, 64)
    for c in caches:
        c.append(0, [c.add_sequence()], k, v)
    got = caches[1].layer_config(0)
    assert got.key_wide_channels == 20 and got.value_scale_f16 and caches[0].layer_config(0).key_wide_channels == 0
    assert caches[1].memory()["bits_per_element"] < caches[0].memory()["bits_per_element"]
    with pytest.raises(vq.InvalidArgumentError, match="wide_channels"):
        vq.KVCache(1, 2, 64, layers=[dataclasses.replace(lc, key_wide_channels=64)])


def test_save_load_roundtrip(tmp_path, rng):
    hkv, hq, d = 2, 4, 64
    c = vq.KVCache(3, hkv, d, n_q_heads=hq, method="kivi4", residual_tokens=8)
    a, b = c.add_sequence(), c.add_sequence()
    k, v = _kv(rng, 2, hkv, 70, d)
    for layer in range(3):
        c.append(layer, [a, b], k, v)
    q = rng.standard_normal((2, hq, 1, d)).astype(np.float32)
    want = c.attend(2, [a, b], q)
    path = tmp_path / "cache.vqc"
    c.save(path)
    for src in (path, c.save()):
        c2 = vq.KVCache.load(src)
        assert c2.n_layers == 3 and c2.length(b, 2) == 70
        assert (c2.n_kv_heads, c2.n_q_heads, c2.head_dim) == (hkv, hq, d)  # read from the file
        assert c2.config()["residual_tokens"] == 8 and c2.config()["page_size"] == c.config()["page_size"]
        assert np.array_equal(c2.attend(2, [a, b], q), want)  # bit for bit
    # one sequence into another cache of the same config (prompt reuse)
    c3 = vq.KVCache(3, hkv, d, n_q_heads=hq, method="kivi4", residual_tokens=8)
    s3 = c3.load_sequence(c.save(seq_id=b))
    assert np.array_equal(c3.attend(2, [s3], q[1:]), want[1:])
    bad = bytearray(c.save())
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(vq.CorruptDataError):
        vq.KVCache.load(bytes(bad))
    with pytest.raises(vq.FileIOError):
        vq.KVCache.load(tmp_path / "missing.vqc")


def test_profile(tmp_path, rng):
    # a profile (make_profile, or a file of vq profile / vq_profile_save) makes the cache its plan
    # describes: the same outputs bit for bit and the same bits as the cache configured by hand
    hkv, hq, d = 2, 4, 64
    plan = dict(layers=["kivimix-turbo2", "turbo3", "kivi2"], sliding_windows=[0, 40, 0], residual_tokens=8,
                window="turbo6")
    blob = vq.make_profile(3, hkv, d, **plan)
    path = tmp_path / "plan.vqprof"
    path.write_bytes(blob)
    k, v = _kv(rng, 1, hkv, 120, d)
    q = rng.standard_normal((1, hq, 1, d)).astype(np.float32)
    caches = [vq.KVCache(3, hkv, d, n_q_heads=hq, **plan), vq.KVCache(3, hkv, d, n_q_heads=hq, profile=blob),
              vq.KVCache(3, hkv, d, n_q_heads=hq, profile=path)]
    outs = []
    for c in caches:
        s = c.add_sequence()
        for layer in range(3):
            for t in range(0, 120, 40):
                c.append(layer, [s], k[:, :, t:t + 40], v[:, :, t:t + 40])
        outs.append([c.attend(layer, [s], q) for layer in range(3)])
    for o in outs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(outs[0], o))
    assert caches[1].memory() == caches[0].memory()
    assert caches[1].config()["window"] == "turbo6" and caches[1].method == "profile"
    # bad input: another shape, fields beside the profile, a damaged file
    with pytest.raises(vq.InvalidArgumentError, match="a profile for head_dim 64"):
        vq.KVCache(3, hkv, 128, profile=blob)
    with pytest.raises(vq.InvalidArgumentError, match="a profile for n_layers 3"):
        vq.KVCache(4, hkv, d, profile=blob)
    with pytest.raises(vq.InvalidArgumentError, match="'method' is set beside 'profile'"):
        vq.KVCache(3, hkv, d, method="kivi2", profile=blob)
    with pytest.raises(vq.CorruptDataError, match="truncated"):
        vq.KVCache(3, hkv, d, profile=blob[:-8])
    bad = bytearray(blob)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(vq.CorruptDataError):
        vq.KVCache(3, hkv, d, profile=bytes(bad))
    with pytest.raises(vq.InvalidArgumentError, match="sliding_windows"):
        vq.make_profile(3, hkv, d, sliding_windows=[0, -1, 0])


def test_sliding_window(rng):
    # a window of 40 tokens: a decode query sees the newest 40 (the f16 reference masks the rest), and
    # the pages older than the window go back to the pool
    hkv, hq, d, n = 2, 4, 64, 300
    c = vq.KVCache(2, hkv, d, n_q_heads=hq, method="f16", page_size=32, sliding_windows=[40, 0])
    s = c.add_sequence()
    k, v = _kv(rng, 1, hkv, n, d)
    for t in range(n):
        for layer in range(2):
            c.append(layer, [s], k[:, :, t:t + 1], v[:, :, t:t + 1])
    q = rng.standard_normal((1, hq, 1, d)).astype(np.float32)
    got = c.attend(0, [s], q, kivi_arith="f32")
    kk, vv = _f16(k[0, :, n - 40:]), _f16(v[0, :, n - 40:])
    for h in range(hq):
        sc = kk[h // (hq // hkv)] @ q[0, h, 0].astype(np.float64) / math.sqrt(d)
        p = np.exp(sc - sc.max())
        want = p @ vv[h // (hq // hkv)] / p.sum()
        assert np.allclose(got[0, h, 0], want, rtol=1e-4, atol=1e-5)
    assert c.memory()["tokens"] < n + 40 + 32


def test_window_turbo8(rng):
    # the residual window at 8 bits (vq_cache_config.window): D + 4 bytes per
    # token and head instead of 2 D, attention within the 8-bit code error of
    # the f16 window's, and a file round trip that keeps it (bit for bit)
    hkv, hq, d, n = 2, 4, 64, 100
    k, v = _kv(rng, 1, hkv, n, d)
    q = rng.standard_normal((1, hq, 1, d)).astype(np.float32)
    outs, mems = {}, {}
    for w in ("turbo6", "f16", "turbo8"):
        c = vq.KVCache(1, hkv, d, n_q_heads=hq, method="kivi4", residual_tokens=n, window=w)
        s = c.add_sequence()
        c.append(0, [s], k, v)
        outs[w], mems[w] = c.attend(0, [s], q), c.memory()
        assert c.config()["window"] == w
    assert mems["f16"]["residual_bytes"] == n * hkv * 4 * d
    assert mems["turbo8"]["residual_bytes"] == n * hkv * 2 * (d + 4)
    assert mems["turbo6"]["residual_bytes"] == n * hkv * 2 * (6 * d // 8 + 2)  # packed codes, f16 scales
    rel = np.linalg.norm(outs["turbo8"] - outs["f16"]) / np.linalg.norm(outs["f16"])
    assert 1e-5 < rel < 3e-2, rel  # 8-bit codes: ~0.6 % RMS per token
    rel6 = np.linalg.norm(outs["turbo6"] - outs["f16"]) / np.linalg.norm(outs["f16"])
    assert rel < rel6 < 1e-1, rel6  # 6-bit codes: ~4x the 8-bit error
    c2 = vq.KVCache.load(c.save())
    assert c2.config()["window"] == "turbo8"
    assert np.array_equal(c2.attend(0, [s], q), outs["turbo8"])
    with pytest.raises(vq.InvalidArgumentError, match="window"):
        vq.KVCache(1, hkv, d, window="int8")
    with pytest.raises(vq.InvalidArgumentError, match="power-of-two"):
        vq.KVCache(1, hkv, 24, method="kivi4", window="turbo8")


def test_vecinfer_method_name_and_its_earlier_spelling():
    # one name per idea: a layer reports "vecinfer"; "pq" is still accepted
    assert vq.LayerConfig(key_method="pq")._tuple()[0] == vq.LayerConfig(key_method="vecinfer")._tuple()[0] == 7
    assert vq.LayerConfig._from_tuple(vq.LayerConfig(key_method="pq")._tuple()).key_method == "vecinfer"


def _attention(q, k, v, causal):
    """float64 attention of q [Hq, Sq, D] (a sequence's last Sq tokens) over
    k, v [Hkv, n, D]."""
    hq, sq, d = q.shape
    hkv, n, _ = k.shape
    out = np.zeros((hq, sq, d))
    for h in range(hq):
        for i in range(sq):
            lim = n - sq + i + 1 if causal else n
            s = k[h // (hq // hkv), :lim] @ q[h, i] / math.sqrt(d)
            p = np.exp(s - s.max())
            out[h, i] = p @ v[h // (hq // hkv), :lim] / p.sum()
    return out


def test_sinks_and_transforms(rng):
    # sink tokens and every transform over an f16 cache: the attention of the
    # untransformed tokens; fitted tables read back and given to a second cache
    # reproduce it bit for bit
    L, hkv, hq, d, n = 2, 2, 4, 32, 40
    k, v = _kv(rng, 1, hkv, n, d)
    k += np.arange(d, dtype=np.float32) * 0.2  # channel offsets (what centering removes)
    q = rng.standard_normal((1, hq, n, d)).astype(np.float32)
    opts = dict(n_q_heads=hq, method="f16", sink_tokens=3, center_keys=True, center_values=True, smooth=True)
    c = vq.KVCache(L, hkv, d, **opts)
    s = c.add_sequence()
    for step in (slice(0, 25), slice(25, n)):
        for layer in range(L):
            c.fit_transforms(layer, [s], k[:, :, step], v[:, :, step], q[:, :, step])
            c.append(layer, [s], np.ascontiguousarray(k[:, :, step]), np.ascontiguousarray(v[:, :, step]))
    assert c.length(s) == n and c.config()["sink_tokens"] == 3
    out = c.attend(1, [s], np.ascontiguousarray(q[:, :, -4:]), causal=True)
    want = _attention(q[0, :, -4:].astype(np.float64), _f16(k[0]), _f16(v[0]), True)
    assert np.linalg.norm(out[0] - want) / np.linalg.norm(want) < 2e-3
    t = [c.transforms(s, layer) for layer in range(L)]
    assert t[0]["smooth"] and t[0]["key_scale"].shape == (hkv, d) and np.all(t[0]["key_scale"] > 0)
    c2 = vq.KVCache(L, hkv, d, **opts, transform_tables=t)
    s2 = c2.add_sequence()
    for layer in range(L):
        c2.append(layer, [s2], k, v)
    out2 = c2.attend(1, [s2], np.ascontiguousarray(q[:, :, -4:]), causal=True)
    assert np.array_equal(out, out2)
    with pytest.raises(vq.InvalidArgumentError, match="sink_tokens"):
        vq.KVCache(L, hkv, d, sink_tokens=-1)
    c3 = vq.KVCache(L, hkv, d, n_q_heads=hq, smooth=True)
    s3 = c3.add_sequence()
    with pytest.raises(vq.InvalidArgumentError, match="key scales"):
        c3.append(0, [s3], k, v)
    assert c3.length(s3) == 0
