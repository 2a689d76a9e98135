"""PA409 hazard: the deprecated torch.cuda.amp / torch.cpu.amp names, in several import
spellings."""
import torch
from torch.cuda.amp import GradScaler as GS, autocast


class ScaledMM(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @torch.cuda.amp.custom_bwd
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)


def train(model, loader, optimizer, use_amp):
    # one scaler for the whole run
    scaler = GS(enabled=use_amp)

    for x, y in loader:
        optimizer.zero_grad()
        with autocast(use_amp):  # positional: enabled
            loss = torch.nn.functional.mse_loss(model(x), y)

        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def evaluate(model, x):
    with torch.cpu.amp.autocast():
        return model(x)
