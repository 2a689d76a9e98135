"""DALLE-pytorch #169 "`--fp16` causing loss to go to Inf or NaN": ``train_dalle.py`` clipped
with torch's ``clip_grad_norm_`` between ``distr_dalle.backward(loss)`` and
``distr_dalle.step()`` of a DeepSpeed engine whose config enables fp16 under ``--fp16``: the
gradients it clips are still multiplied by DeepSpeed's loss scale.

Sources (read):
  https://github.com/lucidrains/DALLE-pytorch/issues/169 (the maintainer: "oh oops! i realized
  deepspeed handles gradient clipping, made the change"; a co-maintainer: "The gradient
  clipping change with DeepSpeed is great")
  the change, commit ae0c16a "let deepspeed handle the gradient clipping" (train_dalle.py: the
  torch clip removed, ``'gradient_clipping': GRAD_CLIP_NORM`` added to the DeepSpeed config),
  and https://github.com/lucidrains/DALLE-pytorch/pull/173 ("Re-add gradient clipping without
  DeepSpeed": the torch clip kept for the non-DeepSpeed path only)
  DeepSpeed runtime/engine.py ``DeepSpeedEngine.backward`` (the loss times the fp16 loss scale)
  and ``_take_model_step`` -> ``FP16_Optimizer.step`` (``unscale_and_clip_grads`` with the
  config's ``gradient_clipping``)

train_dalle.py at ae0c16a^, cut down to the DeepSpeed set-up and the loop;
``dalle_pytorch/deepspeed_utils.py``'s ``maybe_distribute`` is inlined.
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
            else:
                loss.backward()

            clip_grad_norm_(distr_dalle.parameters(), GRAD_CLIP_NORM)  # expect: PA401 [if fp16]

            if args.deepspeed:
                distr_dalle.step()
                # Gradients are automatically zeroed after the step
            else:
                opt.step()
                opt.zero_grad()
