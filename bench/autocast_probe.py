"""Needs CUDA. The aten ops (and dtypes) real CUDA autocast runs for SDPA with a float or bool mask
under each backend, softmax, and a cuDNN LSTM under bf16: the evidence behind the policy notes
in bench/README.md (GPU truth). Run: python bench/autocast_probe.py"""
import torch, torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

class Rec(TorchDispatchMode):
    def __init__(self): super().__init__(); self.ops = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat = lambda x: [t.dtype for t in (x if isinstance(x, (tuple, list)) else [x]) if isinstance(t, torch.Tensor)]
        self.ops.append(f"{func}: in {[str(d)[6:] for d in flat(list(args))]} -> {[str(d)[6:] for d in flat(out)]}")
        return out

def run(name, fn):
    r = Rec()
    try:
        with r:
            out = fn()
        print(f"## {name}: out {out.dtype if isinstance(out, torch.Tensor) else type(out)}")
    except Exception as e:
        print(f"## {name}: raised {type(e).__name__}: {e}")
    for o in r.ops: print("   ", o)

print(torch.__version__)
d = "cuda"
q16 = torch.randn(2, 4, 16, 64, device=d, dtype=torch.float16)
q32 = q16.float()
m32 = torch.randn(2, 4, 16, 16, device=d)
mb = torch.rand(2, 4, 16, 16, device=d) > 0.2
for dt in (torch.float16, torch.bfloat16):
    qd = q16.to(dt)
    with torch.autocast("cuda", dtype=dt):
        run(f"{dt} autocast: sdpa(q low, mask fp32)", lambda: F.scaled_dot_product_attention(qd, qd, qd, attn_mask=m32))
        run(f"{dt} autocast: sdpa(q fp32, mask fp32)", lambda: F.scaled_dot_product_attention(q32, q32, q32, attn_mask=m32))
        run(f"{dt} autocast: sdpa(q low, mask bool)", lambda: F.scaled_dot_product_attention(qd, qd, qd, attn_mask=mb))
        run(f"{dt} autocast: sdpa(q low, mask low)", lambda: F.scaled_dot_product_attention(qd, qd, qd, attn_mask=m32.to(dt)))
        run(f"{dt} autocast: softmax(x low, dim)", lambda: torch.softmax(qd, -1))
    run(f"{dt} no autocast: sdpa(q low, mask fp32)", lambda: F.scaled_dot_product_attention(qd, qd, qd, attn_mask=m32))
from torch.nn.attention import sdpa_kernel, SDPBackend
for b in (SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION):
    with sdpa_kernel(b), torch.autocast("cuda", dtype=torch.float16):
        run(f"fp16 autocast, backend {b}: sdpa(q fp16, mask fp32)", lambda: F.scaled_dot_product_attention(q16, q16, q16, attn_mask=m32))
lstm = torch.nn.LSTM(8, 8).to(d)
with torch.autocast("cuda", dtype=torch.bfloat16):
    run("bf16 autocast: LSTM", lambda: lstm(torch.randn(5, 2, 8, device=d))[0])
