"""afiaka87/glide-finetune #5: "Training on half precision leads to nan values".

Sources (read):
  https://github.com/afiaka87/glide-finetune/issues/5
  https://github.com/afiaka87/glide-finetune/pull/6 ("Fixed half precision optimizer bug")

"after just the first iteration I was running into nan values. As it turns out my gradients and
input values/images were all normal but the adam optimizer by pytorch does has some weird
behavior on float16 precision where it produces nans probably because of a divide by 0 error."
AdamW's default ``eps=1e-8`` rounds to 0 in float16 (the smallest subnormal is ~6e-8), so
``exp_avg / (sqrt(exp_avg_sq) + eps)`` divides by zero wherever a gradient is zero. The weights
are fp16 and the optimizer keeps no fp32 copy (PA407 as well). The findings should name the
condition "when --use_fp16 is set". glide-text2im's ``convert_to_fp16()`` is written here as
``.half()`` so that the reproduction needs only torch; the loop is cut down.
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
    optimizer = th.optim.AdamW([x for x in glide_model.parameters() if x.requires_grad], lr=learning_rate, weight_decay=adam_weight_decay)  # expect: PA406 [if use_fp16|fp16], PA407 [if use_fp16|fp16]
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
