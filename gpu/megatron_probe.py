"""Device probe of the Megatron route (issue 33 item 2), run by ``gpu/megatron-install.sh`` after the install.

``python3 gpu/megatron_probe.py [TINY_MODEL_DIR]`` prints one line per check, exit 1 on any failure:
1. versions: torch, transformer_engine (+ its torch extension), megatron.core, megatron.bridge, verl;
2. ``import verl.workers.engine.megatron`` and ``from verl.models.mcore.bridge import AutoBridge`` (verl 0.9.1's
   default Megatron-Bridge path, ``verl/workers/engine/megatron/transformer_impl.py:340-399``;
   ``megatron/bridge/peft/lora_layers.py:20`` imports ``transformer_engine.pytorch`` unconditionally);
3. with a model dir: the Megatron-Bridge provider exactly as verl builds it (``from_hf_pretrained`` ->
   ``to_megatron_provider(load_weights=False)`` -> ``apply_overrides_and_finalize`` with verl's overrides and the
   tool's ``override_transformer_config``) and its layer spec (TE modules: ``gpt_provider.py:120-125``);
4. one child process per TE attention backend (``unfused``: what the tool emits for ``-flash_attn``; ``fused``:
   cuDNN), each setting the ``NVTE_*_ATTN`` variables the way Megatron does for that ``attention_backend``
   (``megatron/core/models/common/language_module/language_module.py:107-142``): ``te.DotProductAttention``
   forward + backward in ``bshd`` (verl's ``use_remove_padding=False``) and ``thd`` (packed, ``True``) against
   torch sdpa. ``flash`` needs a flash-attn 2/3/4 distribution (``transformer_engine/pytorch/attention/
   dot_product_attention/backends.py:106-230``): none is carried, so it is reported, not run.
``python3 gpu/megatron_probe.py attn BACKEND`` is the child (4). Needs a CUDA GPU for (4) only.
"""

import os
import subprocess
import sys
import time
import warnings

ATTN_ENV = {  # language_module.py:123-142
    "unfused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "0", "NVTE_UNFUSED_ATTN": "1"},
    "fused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "1", "NVTE_UNFUSED_ATTN": "0"},
}


def attn_child(backend: str) -> int:
    """TE DotProductAttention fwd + bwd with only ``backend`` allowed, bshd and thd, against sdpa."""
    import torch
    import torch.nn.functional as F
    import transformer_engine.pytorch as te

    torch.manual_seed(0)
    ok = True
    hq, hkv, d = 4, 2, 64  # gpu/make_tiny.py's heads (hidden 256 / 4 heads), GQA 2
    lens = [37, 64, 20, 100]
    rep = hq // hkv

    def ref_attn(q, k, v):  # [s, h, d] each, causal
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1),
            k.repeat_interleave(rep, 1).transpose(0, 1),
            v.repeat_interleave(rep, 1).transpose(0, 1),
            is_causal=True,
        )
        return out.transpose(0, 1)

    for fmt in ("bshd", "thd"):
        t0 = time.time()
        try:
            if fmt == "bshd":
                s = max(lens)
                q = torch.randn(1, s, hq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                k = torch.randn(1, s, hkv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                v = torch.randn(1, s, hkv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                dpa = te.DotProductAttention(hq, d, num_gqa_groups=hkv, attn_mask_type="causal", qkv_format="bshd")
                out = dpa(q, k, v).view(1, s, hq, d)
                ref = ref_attn(q[0].detach(), k[0].detach(), v[0].detach()).unsqueeze(0)
            else:
                cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), device="cuda", dtype=torch.int32)
                t = int(cu[-1])
                q = torch.randn(t, hq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                k = torch.randn(t, hkv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                v = torch.randn(t, hkv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                dpa = te.DotProductAttention(
                    hq, d, num_gqa_groups=hkv, attn_mask_type="padding_causal", qkv_format="thd"
                )
                out = dpa(q, k, v, cu_seqlens_q=cu, cu_seqlens_kv=cu, max_seqlen_q=max(lens), max_seqlen_kv=max(lens))
                out = out.view(t, hq, d)
                parts = []
                for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
                    parts.append(ref_attn(q.detach()[a:b], k.detach()[a:b], v.detach()[a:b]))
                ref = torch.cat(parts)
            out.float().square().sum().backward()
            torch.cuda.synchronize()
            err = (out.float() - ref.float()).abs().max().item()
            good = err < 5e-2 and q.grad is not None and bool(torch.isfinite(q.grad).all())
            ok &= good
            print(
                f"attn {backend:7s} {fmt}: {'OK' if good else 'MISMATCH'} max|out-sdpa|={err:.3g} ({time.time() - t0:.1f} s)"
            )
        except Exception as e:  # noqa: BLE001 - report every backend x format, then exit 1
            ok = False
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            print(f"attn {backend:7s} {fmt}: FAILED {type(e).__name__}: {first[:300]}")
    return 0 if ok else 1


def provider_check(model_dir: str) -> None:
    """verl's Megatron-Bridge provider for ``model_dir`` (transformer_impl.py:340-399) and its layer spec."""
    import torch
    from megatron.core.transformer.enums import AttnBackend

    from verl.models.mcore.bridge import AutoBridge
    from verl.utils.megatron_utils import mapping_string_to_attn_backend

    bridge = AutoBridge.from_hf_pretrained(model_dir, trust_remote_code=False)
    provider = bridge.to_megatron_provider(load_weights=False)
    overrides = {
        "tensor_model_parallel_size": 1,
        "pipeline_model_parallel_size": 1,
        "expert_model_parallel_size": 1,
        "expert_tensor_parallel_size": None,
        "virtual_pipeline_model_parallel_size": None,
        "context_parallel_size": 1,
        "sequence_parallel": False,
        "overlap_p2p_comm": False,
        "batch_p2p_comm": False,
        "variable_seq_lengths": True,
        "attention_backend": AttnBackend.flash,
        "moe_token_dispatcher_type": "alltoall",
        "moe_router_load_balancing_type": "none",
    }
    # what the tool emits for -flash_attn + gradient_checkpointing (dapo_ops/core/profiles.py feature_overrides)
    overrides.update(
        mapping_string_to_attn_backend(
            {
                "recompute_granularity": "selective",
                "recompute_modules": ["core_attn"],
                "recompute_method": None,
                "recompute_num_layers": None,
                "attention_backend": "unfused",
            }
        )
    )
    provider.apply_overrides_and_finalize(dtype=torch.bfloat16, overrides=overrides)
    spec = provider.transformer_layer_spec
    spec = spec(provider) if callable(spec) else spec
    sub = spec.submodules.self_attention.submodules
    print(
        f"provider: {type(provider).__name__} attention_backend={provider.attention_backend.name} "
        f"calculate_per_token_loss={provider.calculate_per_token_loss} "
        f"tied={provider.share_embeddings_and_output_weights} core_attention={sub.core_attention.__name__} "
        f"linear_qkv={sub.linear_qkv.__name__}"
    )


def main(argv: list[str]) -> int:
    if argv[:1] == ["attn"]:
        return attn_child(argv[1])
    warnings.simplefilter("ignore")
    t0 = time.time()
    import torch

    ok = True
    steps = (
        (
            "transformer_engine.pytorch",
            "import transformer_engine, transformer_engine.pytorch as te; v = transformer_engine.__version__",
        ),
        ("megatron.core", "import megatron.core; v = megatron.core.__version__"),
        ("megatron.bridge", "import megatron.bridge; from megatron.bridge.package_info import __version__ as v"),
        ("verl.workers.engine.megatron", "import verl, verl.workers.engine.megatron; v = 'verl ' + verl.__version__"),
        ("verl.models.mcore.bridge", "from verl.models.mcore.bridge import AutoBridge; v = 'Megatron-Bridge path'"),
    )
    print(
        f"torch {torch.__version__} cuda {torch.version.cuda} device "
        f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}"
    )
    for name, code in steps:
        try:
            ns: dict = {}
            exec(code, ns)  # noqa: S102 - fixed strings above
            print(f"import {name}: OK ({ns['v']})")
        except Exception as e:  # noqa: BLE001
            ok = False
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            print(f"import {name}: FAILED {type(e).__name__}: {first[:300]}")
    if ok and len(argv) > 0:
        try:
            provider_check(argv[0])
        except Exception as e:  # noqa: BLE001
            ok = False
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            print(f"provider: FAILED {type(e).__name__}: {first[:300]}")
    print(f"imports + provider in {time.time() - t0:.1f} s")
    if ok and torch.cuda.is_available():
        for backend, env in ATTN_ENV.items():
            r = subprocess.run([sys.executable, __file__, "attn", backend], env={**os.environ, **env}, timeout=120)
            ok &= r.returncode == 0
        try:
            from importlib.metadata import version as dist_version

            fa = [f"{n} {dist_version(n)}" for n in ("flash-attn", "flash-attn-3", "flash-attn-4") if _has(n)]
        except Exception:  # noqa: BLE001
            fa = []
        print(
            f"attn flash: {'available via ' + ', '.join(fa) if fa else 'no flash-attn 2/3/4 distribution: not usable'}"
        )
    print(f"probe {'OK' if ok else 'FAILED'} in {time.time() - t0:.1f} s")
    return 0 if ok else 1


def _has(dist: str) -> bool:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution(dist)
    except PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
