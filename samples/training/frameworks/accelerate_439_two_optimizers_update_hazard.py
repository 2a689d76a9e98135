"""accelerate #439 "Potential bugs caused by AcceleratedOptimizer": one GradScaler for every
prepared optimizer, and ``scaler.update()`` in each ``AcceleratedOptimizer.step``: with both
backwards before both steps, the second optimizer unscales gradients scaled before the first
step's update changed the scale.

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
        accelerator.backward(loss1)
        # scaler.update() is called here
        optim0.step()
        # scaler.update() is called again
        optim1.step()  # expect: PA402
        optim0.zero_grad()
        optim1.zero_grad()
