"""Device probe of the flash-attn-4 route: is ``attn_implementation="flash_attention_4"`` usable by transformers 5.9
on this GPU, and do FA4's varlen forward + backward (what verl's remove-padding path calls through transformers'
``_flash_attention_forward`` with packed ``position_ids``) agree with sdpa over the same packed sequences?
Prints one line per check and the JIT compile time; exit 1 on any failure. Needs a CUDA GPU (sm90+)."""

import sys
import time

import torch
import torch.nn.functional as F
from transformers.utils.import_utils import is_flash_attn_4_available


def main() -> int:
    print(
        f"torch {torch.__version__}, device {torch.cuda.get_device_name()}, "
        f"is_flash_attn_4_available={is_flash_attn_4_available()}"
    )
    from flash_attn.cute import flash_attn_varlen_func  # noqa: PLC0415

    torch.manual_seed(0)
    ok = True
    for hq, hkv, d in ((8, 2, 64), (14, 2, 64), (28, 4, 128)):  # tiny-style, Qwen2.5-0.5B, Qwen2.5-7B heads
        lens = [37, 200, 64, 511]
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device="cuda", dtype=torch.int32)
        t = int(cu[-1])
        q = torch.randn(t, hq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(t, hkv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(t, hkv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        t0 = time.time()
        out = flash_attn_varlen_func(
            q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens), max_seqlen_k=max(lens), causal=True
        )
        out = out[0] if isinstance(out, tuple) else out
        out.float().square().sum().backward()
        torch.cuda.synchronize()
        first = time.time() - t0
        gq = q.grad.clone()
        q.grad = k.grad = v.grad = None
        ref, rgq = [], None
        qr = q.detach().clone().requires_grad_()
        for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
            kk = k.detach()[a:b].repeat_interleave(hq // hkv, 1).transpose(0, 1)
            vv = v.detach()[a:b].repeat_interleave(hq // hkv, 1).transpose(0, 1)
            ref.append(F.scaled_dot_product_attention(qr[a:b].transpose(0, 1), kk, vv, is_causal=True).transpose(0, 1))
        ref = torch.cat(ref)
        ref.float().square().sum().backward()
        rgq = qr.grad
        e_out = (out.float() - ref.float()).abs().max().item()
        e_g = ((gq.float() - rgq.float()).abs().max() / rgq.float().abs().max()).item()
        good = e_out < 2e-2 and e_g < 5e-2
        ok &= good
        print(
            f"hq={hq} hkv={hkv} d={d}: first call (JIT) {first:.1f} s, max|out-sdpa| {e_out:.2e}, "
            f"rel max|dq-sdpa| {e_g:.2e}: {'OK' if good else 'MISMATCH'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
