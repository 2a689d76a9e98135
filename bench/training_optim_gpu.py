"""What really happens on CUDA for the hazards of PA405-PA407 (and their fixed twins), a
few steps each: loss, NaN/inf weights, how many norm weights moved. Needs a GPU:

    python bench/training_optim_gpu.py > optim_gpu.txt

PA406: the sample's model (samples/training/pa406_optimizer_eps_underflow_hazard.py with
--fp16), an fp16 TransformerEncoderLayer stepped by AdamW with the default eps, on the
foreach path (CUDA's default), the single-tensor path and the fused kernel, next to the
fixed twin (fp32 weights, fp16 autocast, GradScaler) and an fp16 embedding (rows not in the
batch). PA405: fp16 weights with a GradScaler. PA407: bf16 LayerNorm weights under AdamW at
lr=1e-4, pure bf16 against fp32 master weights.
"""
import torch
from torch import nn

STEPS = 10


def _nonfinite(model) -> int:
    return sum(int((~torch.isfinite(p)).sum()) for p in model.parameters())


def pa406(dtype, optimizer_kwargs, autocast=False):
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(d_model=64, nhead=4).cuda()
    if not autocast:
        model = model.to(dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **optimizer_kwargs)
    scaler = torch.amp.GradScaler("cuda", enabled=autocast)
    curve = []
    for step in range(STEPS):
        x = torch.randn(16, 8, 64, device="cuda", dtype=torch.float32 if autocast else dtype)
        with torch.autocast("cuda", dtype=torch.float16, enabled=autocast):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        curve.append(f"{loss.item():.4g}")
    return f"loss {' '.join(curve)}; non-finite weights after {STEPS} steps: {_nonfinite(model)}"


def pa406_embedding(eps):
    torch.manual_seed(0)
    embedding = nn.Embedding(1000, 32).cuda().half()
    optimizer = torch.optim.Adam(embedding.parameters(), lr=1e-3, eps=eps)
    tokens = torch.randint(0, 100, (64,), device="cuda")  # rows 100..999 never in the batch
    embedding(tokens).float().pow(2).mean().backward()
    optimizer.step()
    bad_rows = int((~torch.isfinite(embedding.weight)).any(dim=1).sum())
    return f"eps={eps:g}: rows with NaN/inf after one step: {bad_rows} of 1000"


def pa405():
    model = nn.Linear(32, 10).cuda().half()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    loss = model(torch.randn(8, 32, device="cuda", dtype=torch.float16)).float().pow(2).mean()
    scaler.scale(loss).backward()
    try:
        scaler.step(optimizer)
    except ValueError as exc:
        return f"ValueError: {exc}"
    return "no error"


def pa407(master_fp32, steps=100):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(768, 768), nn.LayerNorm(768)).cuda()
    if not master_fp32:
        model = model.to(torch.bfloat16)
    norm = model[1].weight
    before = norm.detach().clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    for _ in range(steps):
        x = torch.randn(32, 768, device="cuda", dtype=torch.float32 if master_fp32 else torch.bfloat16)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=master_fp32):
            loss = (model(x).float() - 0.5).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    moved = int((norm.detach() != before).sum())
    return f"LayerNorm weights that moved in {steps} steps: {moved} of 768"


def main():
    print(torch.__version__, torch.cuda.get_device_name())
    print("PA406 hazard, fp16 weights, AdamW default eps, foreach:", pa406(torch.float16, {}))
    print("PA406 hazard, fp16 weights, AdamW default eps, foreach=False:", pa406(torch.float16, {"foreach": False}))
    print("PA406 fp16 weights, AdamW default eps, fused=True:", pa406(torch.float16, {"fused": True}))
    print("PA406 fp16 weights, AdamW eps=1e-4:", pa406(torch.float16, {"eps": 1e-4}))
    print("PA406 bf16 weights, AdamW default eps:", pa406(torch.bfloat16, {}))
    print("PA406 fixed twin, fp32 weights + fp16 autocast + GradScaler:", pa406(torch.float16, {}, autocast=True))
    print("PA406 fp16 embedding, Adam:", pa406_embedding(1e-8), "|", pa406_embedding(6e-8))
    print("PA405 fp16 weights + GradScaler.step:", pa405())
    print("PA407 pure bf16 + AdamW lr=1e-4:", pa407(False))
    print("PA407 fp32 master weights + bf16 autocast:", pa407(True))


if __name__ == "__main__":
    main()
