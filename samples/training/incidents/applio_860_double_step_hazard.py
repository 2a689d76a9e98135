"""IAHispano/Applio PR #860: "optimizer step bugfix" - plain ``optim.step()`` beside ``scaler.step``.

Source (read): https://github.com/IAHispano/Applio/pull/860

"Simply remove both: optim_g.step() optim_d.step() at lines: 433 and 434 ... You should not
use optim.step() directly when you're working with GradScaler. If you do, you would bypass
the necessary gradient scaling and unscaling steps" - the PR was found while "Debugging NaNs,
Infs and values/params in gradients of Generator and Discriminator". Each optimizer stepped
twice per batch, the second time on gradients the scaler had not checked for inf/NaN.
The GAN loop around the calls is cut down (RVC-style generator/discriminator training); the
two plain steps sit together after ``scaler.update()``, as the PR's line numbers suggest.
"""
import torch
from torch.amp import GradScaler, autocast


def clip_grad_value(parameters, clip_value):
    total_norm = 0.0
    for p in parameters:
        if p.grad is not None:
            total_norm += p.grad.data.norm(2).item() ** 2
    return total_norm ** 0.5


def train_and_evaluate(nets, optims, scaler, train_loader, fp16_run, discriminator_loss, generator_loss):
    net_g, net_d = nets
    optim_g, optim_d = optims
    net_g.train()
    net_d.train()
    for batch_idx, (phone, wave) in enumerate(train_loader):
        with autocast("cuda", enabled=fp16_run):
            y_hat = net_g(phone)
            y_d_hat_r, y_d_hat_g = net_d(wave, y_hat.detach())
            loss_disc = discriminator_loss(y_d_hat_r, y_d_hat_g)
        optim_d.zero_grad()
        scaler.scale(loss_disc).backward()
        scaler.unscale_(optim_d)
        grad_norm_d = clip_grad_value(net_d.parameters(), None)
        scaler.step(optim_d)

        with autocast("cuda", enabled=fp16_run):
            y_d_hat_r, y_d_hat_g = net_d(wave, y_hat)
            loss_gen_all = generator_loss(y_d_hat_g)
        optim_g.zero_grad()
        scaler.scale(loss_gen_all).backward()
        scaler.unscale_(optim_g)
        grad_norm_g = clip_grad_value(net_g.parameters(), None)
        scaler.step(optim_g)
        scaler.update()
        optim_g.step()  # expect: PA402
        optim_d.step()  # expect: PA402


def run(net_g, net_d, train_loader, fp16_run, discriminator_loss, generator_loss):
    optim_g = torch.optim.AdamW(net_g.parameters(), lr=1e-4, betas=(0.8, 0.99), eps=1e-9)
    optim_d = torch.optim.AdamW(net_d.parameters(), lr=1e-4, betas=(0.8, 0.99), eps=1e-9)
    scaler = GradScaler("cuda", enabled=fp16_run)
    train_and_evaluate((net_g, net_d), (optim_g, optim_d), scaler, train_loader, fp16_run, discriminator_loss, generator_loss)
