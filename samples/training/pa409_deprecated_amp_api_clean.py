"""PA409 clean twin: the torch.amp spellings, with the device."""
import torch
from torch.amp import GradScaler as GS, autocast


class ScaledMM(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)


def train(model, loader, optimizer, use_amp):
    # one scaler for the whole run
    scaler = GS("cuda", enabled=use_amp)

    for x, y in loader:
        optimizer.zero_grad()
        with autocast("cuda", enabled=use_amp):
            loss = torch.nn.functional.mse_loss(model(x), y)

        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def evaluate(model, x):
    with torch.amp.autocast("cpu"):
        return model(x)
