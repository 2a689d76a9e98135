"""accelerate #439, fixed: each loss's backward right before its own optimizer's step, so each
``AcceleratedOptimizer.step`` unscales with the scale its gradients were multiplied by.

Sources (read):
  https://github.com/huggingface/accelerate/issues/439 (the reporter's script, below; the
  maintainer: "Most of the time, nothing happens, so I don't think this would result in any
  bug": the scale changes on an inf, or every 2,000 finite steps, and on those steps the second
  optimizer's gradients are divided by a scale twice or half the one they were multiplied by)
  https://pytorch.org/docs/stable/notes/amp_examples.html ("Working with Multiple Models,
  Losses, and Optimizers": update once, after every optimizer has stepped)
  accelerate 1.15.0 optimizer.py ``AcceleratedOptimizer.step``: ``scaler.step``, ``scaler.update``
"""
from accelerate import Accelerator


def train(model0, model1, optim0, optim1, criterion, loader):
    accelerator = Accelerator(mixed_precision="fp16")
    model0, model1, optim0, optim1 = accelerator.prepare(model0, model1, optim0, optim1)
    for input, target in loader:
        output0 = model0(input)
        output1 = model1(input)
        loss0 = criterion(output0, target)
        loss1 = criterion(output1, target)

        accelerator.backward(loss0)
        optim0.step()  # unscales and updates with the scale loss0 was multiplied by
        accelerator.backward(loss1)
        optim1.step()  # loss1 was scaled after that update: one scale throughout
        optim0.zero_grad()
        optim1.zero_grad()
