"""Device probe of the Megatron route (issue 33 item 2), run by ``gpu/megatron-install.sh`` after the install.

``python3 gpu/megatron_probe.py [TINY_MODEL_DIR]`` prints one line per check, exit 1 on any failure:
0. shadowing: no top-level module of ``/tmp/site-mega`` (``$MEGA_SITE``, first on PYTHONPATH) may also exist later on
   ``sys.path`` (``/tmp/site``, the image): the H200 run of 2026-12-02 lost Ray's dashboard agent to a newer
   ``opentelemetry-api`` carried for multi-storage-client (``cannot import name '_ExtendedAttributes' from
   'opentelemetry.util.types'``). ``python3 gpu/megatron_probe.py shadow`` runs this check alone (no imports);
1. versions: torch, transformer_engine (+ its torch extension), megatron.core, megatron.bridge, verl;
2. ``import verl.workers.engine.megatron`` and ``from verl.models.mcore.bridge import AutoBridge`` (verl 0.9.1's
   default Megatron-Bridge path, ``verl/workers/engine/megatron/transformer_impl.py:340-399``;
   ``megatron/bridge/peft/lora_layers.py:20`` imports ``transformer_engine.pytorch`` unconditionally), then the
   imports a run reaches only after start-up, which failed one by one on the H200 (2026-12-02): Megatron-Bridge's
   training config (``megatron/bridge/training/config.py:53`` -> ``data/builders/energon.py:25`` -> megatron-energon;
   reached by verl ``utils/megatron_utils.py:456`` at model build), nvidia-modelopt (``megatron/bridge/models/
   conversion/auto_bridge.py:1127`` in ``save_hf_weights``, reached on every checkpoint save by verl
   ``utils/checkpoint/megatron_checkpoint_manager.py:1019``), verl's Megatron checkpoint manager, and Ray's dashboard
   reporter agent (which opentelemetry it gets: ``/tmp/site``'s);
3. with a model dir: the Megatron-Bridge provider exactly as verl builds it (``from_hf_pretrained`` ->
   ``to_megatron_provider(load_weights=False)`` -> ``apply_overrides_and_finalize`` with verl's overrides and the
   tool's ``override_transformer_config``) and its layer spec (TE modules: ``gpt_provider.py:120-125``);
4. one child process per TE attention backend (``unfused``: what the tool emits for ``-flash_attn``; ``fused``:
   cuDNN), each setting the ``NVTE_*_ATTN`` variables the way Megatron does for that ``attention_backend``
   (``megatron/core/models/common/language_module/language_module.py:107-142``): ``te.DotProductAttention``
   forward + backward in ``bshd`` (verl's ``use_remove_padding=False``) and ``thd`` (packed, ``True``) against
   torch sdpa. ``flash`` needs a flash-attn 2/3/4 distribution (``transformer_engine/pytorch/attention/
   dot_product_attention/backends.py:106-230``): none is carried, so it is reported, not run.
``python3 gpu/megatron_probe.py attn BACKEND`` is the child (4). Needs a CUDA GPU for (4) only; 0-3 also run on CPU
(``gpu/megatron-check-here.sh``).
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


MEGA_SITE = os.environ.get("MEGA_SITE", "/tmp/site-mega")

# import name -> code binding ``v`` (the version or origin printed); fixed strings, exec'd in order
IMPORT_STEPS = (
    (
        "transformer_engine.pytorch",
        "import transformer_engine, transformer_engine.pytorch as te; v = transformer_engine.__version__",
    ),
    ("megatron.core", "import megatron.core; v = megatron.core.__version__"),
    ("megatron.bridge", "import megatron.bridge; from megatron.bridge.package_info import __version__ as v"),
    ("verl.workers.engine.megatron", "import verl, verl.workers.engine.megatron; v = 'verl ' + verl.__version__"),
    ("verl.models.mcore.bridge", "from verl.models.mcore.bridge import AutoBridge; v = 'Megatron-Bridge path'"),
    (
        "megatron.bridge.training.config",
        "import megatron.bridge.training.config, megatron.energon; "
        "from importlib.metadata import version; v = 'megatron-energon ' + version('megatron-energon')",
    ),
    (
        "modelopt.torch.quantization.utils",
        "from modelopt.torch.quantization.utils import is_quantized; import modelopt; v = 'modelopt ' + modelopt.__version__",
    ),
    (
        "verl.utils.checkpoint.megatron_checkpoint_manager",
        "import verl.utils.checkpoint.megatron_checkpoint_manager; v = 'checkpoint save path'",
    ),
    (
        "ray.dashboard.modules.reporter.reporter_agent",
        "import ray.dashboard.modules.reporter.reporter_agent, opentelemetry.util.types as t; "
        "v = 'opentelemetry from ' + os.path.dirname(os.path.dirname(os.path.dirname(t.__file__)))",
    ),
)


def shadowed(site: str, path: list[str]) -> list[str]:
    """Top-level modules of ``site`` that also exist in an entry of ``path`` after ``site``.

    Returns ``"NAME (also in DIR)"`` strings, empty when none (or when ``site`` is not on ``path``). A name counts
    as a package dir, ``NAME.py`` or an extension ``NAME.*.so``; ``*.dist-info``, ``*.data``, ``bin`` and
    ``__pycache__`` are not modules. Imports nothing; reads directory listings only.
    """
    site = os.path.realpath(site)
    real = [os.path.realpath(p) if p else os.getcwd() for p in path]
    if site not in real:
        return []
    later = [p for p in real[real.index(site) + 1 :] if os.path.isdir(p) and p != site]

    def names(d: str) -> set[str]:
        out = set()
        for e in os.listdir(d):
            if e.endswith((".dist-info", ".data", ".egg-info", ".pth")) or e in ("bin", "__pycache__"):
                continue
            if os.path.isdir(os.path.join(d, e)):
                out.add(e)
            elif e.endswith(".py"):
                out.add(e[:-3])
            elif e.endswith(".so"):
                out.add(e.split(".")[0])
        return out

    mine = names(site)
    hits = []
    for d in later:
        for n in sorted(mine & names(d)):
            hits.append(f"{n} (also in {d})")
    return hits


def shadow_check() -> bool:
    """Print the shadowing verdict for ``MEGA_SITE`` against ``sys.path``; True when nothing is shadowed."""
    if not os.path.isdir(MEGA_SITE):
        print(f"shadow: FAILED no {MEGA_SITE}: run bash gpu/megatron-install.sh first")
        return False
    hits = shadowed(MEGA_SITE, sys.path)
    if hits:
        print(
            f"shadow: FAILED {MEGA_SITE} hides {len(hits)} module(s) of /tmp/site or the image: {', '.join(hits)[:600]}"
            " -> drop the package from gpu/wheels-megatron-extra.txt and rerun gpu/megatron-prepare.sh"
        )
        return False
    print(f"shadow: OK (no module of {MEGA_SITE} is also later on sys.path)")
    return True


def main(argv: list[str]) -> int:
    if argv[:1] == ["attn"]:
        return attn_child(argv[1])
    if argv[:1] == ["shadow"]:
        return 0 if shadow_check() else 1
    warnings.simplefilter("ignore")
    t0 = time.time()
    import torch

    ok = shadow_check()
    print(
        f"torch {torch.__version__} cuda {torch.version.cuda} device "
        f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}"
    )
    for name, code in IMPORT_STEPS:
        try:
            ns: dict = {"os": os}
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
