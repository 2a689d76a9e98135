"""afiaka87/glide-finetune #5, fixed as in PR #6: AdamW ``eps=1e-4`` under half precision.

Source (read): https://github.com/afiaka87/glide-finetune/pull/6 - "This can be fixed by setting
the eps variable to 1e-4 instead of the default 1e-8. This is the only thing this pr does".

1e-4 is representable in float16, so the division no longer hits zero. The PR does nothing
about the missing fp32 master weights (fp16 parameters, plain AdamW), so that finding stays
(``residual: PA407``).
"""
import argparse

import torch as th


def base_train_step(model, diffusion, batch, device):
    tokens, masks, reals = [x.to(device) for x in batch]
    timesteps = th.randint(0, len(diffusion.betas) - 1, (reals.shape[0],), device=device)
    noise = th.randn_like(reals, device=device)
    x_t = diffusion.q_sample(reals, timesteps, noise=noise).to(device)
    epsilon = model(x_t, timesteps, tokens=tokens, mask=masks)[:, :3]
    return th.nn.functional.mse_loss(epsilon, noise.to(epsilon.dtype))


def run_glide_finetune(glide_model, glide_diffusion, dataloader, learning_rate=1e-5, adam_weight_decay=0.0, use_fp16=False, device="cuda"):
    if use_fp16:
        glide_model = glide_model.half()
    glide_model.to(device)
    glide_model.train()
    optimizer = th.optim.AdamW([x for x in glide_model.parameters() if x.requires_grad], lr=learning_rate, weight_decay=adam_weight_decay, eps=1e-4)  # residual: PA407
    for batch in dataloader:
        loss = base_train_step(glide_model, glide_diffusion, batch, device)
        loss.backward()
        optimizer.step()
        glide_model.zero_grad()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning_rate", type=float, default=1e-5)
    parser.add_argument("--adam_weight_decay", type=float, default=0.0)
    parser.add_argument("--use_fp16", action="store_true")
    args = parser.parse_args()
    run_glide_finetune(th.nn.Linear(1, 1), None, [], args.learning_rate, args.adam_weight_decay, args.use_fp16)


if __name__ == "__main__":
    main()
