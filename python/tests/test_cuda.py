"""torch CUDA tensors through the package: every result on the device, equal
to the CPU library's result on the same data within the CUDA kernels'
documented accuracy; the CUDA KV cache and the transformers path on the GPU.
Skipped without a GPU, torch CUDA, or a package built with CUDA
(PY_CUDA=ON make test-python)."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import veloxquant as vq  # noqa: E402

if not (torch.cuda.is_available() and vq.cuda_available()):
    pytest.skip("no CUDA device, or veloxquant built without CUDA", allow_module_level=True)

import ref  # noqa: E402

DEV = torch.device("cuda:0")


def _both(a):
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t, t.to(DEV)


def _np(t):
    return t.detach().float().cpu().numpy() if t.dtype not in (torch.uint8, torch.int32) else t.cpu().numpy()


def test_outputs_live_on_the_device_and_match_the_cpu():
    rng = np.random.default_rng(0)
    x_c, x_g = _both(rng.standard_normal((4, 9, 128)).astype(np.float32))
    d_c, d_g = _both(vq.random_signs(1, 128))
    ic, sc = vq.turboquant_hadamard_quantize(x_c, 3, diag=d_c)
    ig, sg = vq.turboquant_hadamard_quantize(x_g, 3, diag=d_g)
    assert ig.device == DEV and sg.device == DEV
    torch.cuda.synchronize()
    assert (ic != ig.cpu()).float().mean().item() < 1e-3  # ties near boundaries may differ
    assert torch.allclose(sc, sg.cpu(), rtol=1e-5)
    kb_c, km_c = vq.rabitq_encode(x_c, d_c)
    kb_g, km_g = vq.rabitq_encode(x_g, d_g)
    assert torch.equal(kb_c, kb_g.cpu()) and torch.allclose(km_c, km_g.cpu(), rtol=1e-5)


@pytest.mark.parametrize("qdt", [torch.float16, torch.float32])
def test_scalar_fused_decode_attend_cuda(qdt):
    rng = np.random.default_rng(1)
    B, Hq, Hkv, S, D, g = 1, 8, 2, 300, 128, 32
    k_c, k_g = _both(rng.standard_normal((B, Hkv, S, D)).astype(np.float32))
    v_c, v_g = _both(rng.standard_normal((B, Hkv, S, D)).astype(np.float32))
    q_c = torch.from_numpy(rng.standard_normal((B, Hq, 1, D)).astype(np.float32)).to(qdt)
    kq = vq.kivi_quantize_keys(k_g, 4, g, packed=True, param_dtype="float16")
    vqv = vq.kivi_quantize_values(v_g, 4, g, packed=True, param_dtype="float16")
    out = vq.scalar_fused_decode_attend(q_c.to(DEV), *kq, *vqv, g, 1 / math.sqrt(D))
    assert out.device == DEV and out.dtype == qdt
    k_hat = _np(vq.kivi_dequantize_keys(*[t.cpu() for t in kq], 4, g))
    v_hat = _np(vq.kivi_dequantize_values(*[t.cpu() for t in vqv], 4, g, head_dim=D))
    want = ref.attention(_np(q_c), k_hat, v_hat, 1 / math.sqrt(D))
    # the CUDA query is split into 22-bit int8 planes (~2^-21 of max|x| per code unit), plus f16 output rounding
    tol = (2e-3 if qdt == torch.float16 else 1e-4) * np.abs(v_hat).max()
    assert np.abs(_np(out) - want).max() < tol


def test_fused_sdpa_cuda_every_key_format():
    rng = np.random.default_rng(2)
    B, Hq, Hkv, S, D = 1, 4, 2, 77, 64
    k_c, k_g = _both(rng.standard_normal((B, Hkv, S, D)).astype(np.float32))
    v_c, v_g = _both(rng.standard_normal((B, Hkv, S, D)).astype(np.float32))
    q_c, q_g = _both(rng.standard_normal((B, Hq, 1, D)).astype(np.float32))
    encs = [vq.F16Keys(k_g), vq.turboquant_rvq_encode(k_g, 2, 2),
            vq.KIVIKeys(*vq.kivi_quantize_keys(k_g, 4, 16, packed=True), 4, 16),
            vq.TurboQuantizer(3, seed=1).encode(k_g)]
    for e in encs:
        out = vq.fused_sdpa(q_g, e, v_g, 0.125)
        assert out.device == DEV
        cpu_e = type(e)(*[getattr(e, n).cpu() if isinstance(getattr(e, n), torch.Tensor) else getattr(e, n)
                          for n in e.__slots__])
        want = vq.fused_sdpa(q_c, cpu_e, v_c, 0.125)
        assert torch.allclose(out.cpu(), want, atol=1e-4 * v_c.abs().max().item()), type(e).__name__


def test_kv_cache_on_cuda_matches_cpu():
    rng = np.random.default_rng(3)
    L, Hkv, Hq, D, n = 2, 2, 6, 64, 150
    k_c, k_g = _both(rng.standard_normal((1, Hkv, n, D)).astype(np.float16))
    v_c, v_g = _both(rng.standard_normal((1, Hkv, n, D)).astype(np.float16))
    q_c, q_g = _both(rng.standard_normal((1, Hq, 1, D)).astype(np.float16))
    outs = []
    for dev, (k, v, q) in (("cpu", (k_c, v_c, q_c)), ("cuda:0", (k_g, v_g, q_g))):
        c = vq.KVCache(L, Hkv, D, n_q_heads=Hq, method="kivi4", device=dev)
        s = c.add_sequence()
        c.append(1, [s], k, v)
        outs.append(c.attend(1, [s], q))
    assert outs[1].device == DEV
    assert torch.allclose(outs[1].cpu().float(), outs[0].float(), atol=3e-3 * v_c.abs().max().item())


def test_transformers_on_cuda():
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    import pathlib
    import veloxquant.hf  # noqa: F401
    model = pathlib.Path(__file__).resolve().parents[2] / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not model.exists():
        pytest.skip("model file not present")
    tok = transformers.AutoTokenizer.from_pretrained(model.parent, gguf_file=model.name)
    m = transformers.AutoModelForCausalLM.from_pretrained(model.parent, gguf_file=model.name,
                                                          dtype=torch.float16).to(DEV).eval()
    ids = tok("The capital of France is", return_tensors="pt").input_ids.to(DEV)
    with torch.no_grad():
        want = m(ids, past_key_values=transformers.DynamicCache()).logits
        got = m(ids, past_key_values=vq.hf.Cache(m, method="f16")).logits
        assert ((got - want).abs().max() / want.abs().max()).item() < 1e-2  # f16 model: f16 activations
        out = m.generate(ids, max_new_tokens=8, do_sample=False, past_key_values=vq.hf.Cache(m, method="kivi4"))
    assert "Paris" in tok.decode(out[0][ids.shape[1]:])
    vq.hf.uninstall(m)
