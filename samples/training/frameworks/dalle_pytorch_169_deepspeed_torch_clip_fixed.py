"""DALLE-pytorch #169, fixed as the maintainers did: DeepSpeed clips, to the config's
``'gradient_clipping'``, inside ``distr_dalle.step()`` after it unscaled (commit ae0c16a); torch's
clip stays on the path without DeepSpeed only (PR #173).

Sources (read):
  https://github.com/lucidrains/DALLE-pytorch/issues/169
  commit ae0c16a "let deepspeed handle the gradient clipping" and
  https://github.com/lucidrains/DALLE-pytorch/pull/173 (9221bf7: "Re-add gradient clipping without
  DeepSpeed"; the two ``if args.deepspeed`` blocks merged)
"""
import argparse

import deepspeed
import torch
from torch.nn.utils import clip_grad_norm_
from torch.optim import Adam

GRAD_CLIP_NORM = 0.5
BATCH_SIZE = 4
LEARNING_RATE = 3e-4
EPOCHS = 20


def maybe_distribute(args=None, model=None, optimizer=None, model_parameters=None, training_data=None,
                     lr_scheduler=None, **kwargs):
    """Return a model engine, optimizer, dataloader, and learning rate scheduler, wrapped by
    DeepSpeed when it is used; unchanged otherwise."""
    if not args.deepspeed:
        return (model, optimizer, training_data, lr_scheduler)
    return deepspeed.initialize(args=args, model=model, optimizer=optimizer, model_parameters=model_parameters,
                                training_data=training_data, lr_scheduler=lr_scheduler, **kwargs)


def main(dalle, ds, dl):
    parser = argparse.ArgumentParser()
    parser.add_argument('--fp16', action='store_true')
    parser = deepspeed.add_config_arguments(parser)
    args = parser.parse_args()

    opt = Adam(dalle.parameters(), lr=LEARNING_RATE)
    deepspeed_config = {
        'train_batch_size': BATCH_SIZE,
        'gradient_clipping': GRAD_CLIP_NORM,
        'fp16': {
            'enabled': args.fp16,
        },
    }
    (distr_dalle, opt, dl, scheduler) = maybe_distribute(
        args=args,
        model=dalle,
        optimizer=opt,
        model_parameters=dalle.parameters(),
        training_data=ds if args.deepspeed else dl,
        config_params=deepspeed_config,
    )

    for epoch in range(EPOCHS):
        for i, (text, images) in enumerate(dl):
            if args.fp16:
                images = images.half()
            text, images = map(lambda t: t.cuda(), (text, images))

            loss = distr_dalle(text, images, return_loss=True)

            if args.deepspeed:
                distr_dalle.backward(loss)
                distr_dalle.step()
                # Gradients are automatically zeroed after the step
            else:
                loss.backward()
                clip_grad_norm_(distr_dalle.parameters(), GRAD_CLIP_NORM)
                opt.step()
                opt.zero_grad()
