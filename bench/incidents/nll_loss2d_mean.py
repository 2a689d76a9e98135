"""A segmentation loss in a pure-fp16 model: ``nll_loss`` with a mean over 65,536 pixels.

Thread: https://github.com/pytorch/pytorch/issues/29429 ("NLLLoss reduce=True returning nan in
float16"): ``nn.NLLLoss()`` on fp16 log-probabilities of shape (32, 11, 256, 256) returns NaN
on the GPU, while ``nll_loss(..., reduction="none").mean()`` gives -0.4995; the same report
for ``nll_loss`` on 16-bit CUDA tensors is pytorch/pytorch#61523.
What failed: CUDA's 2-D kernel (ATen/native/cuda/NLLLoss2d.cu) sums each block's pixels in
fp32, then adds the sum and the block's weight total with ``gpuAtomicAdd`` into fp16
``output`` and ``total_weight``. Past 65,504 pixels the weight total is inf, and so is the
loss sum: the mean is inf / inf = NaN, whatever the logits.
Upstream fix (both threads' advice): compute the loss in fp32 (``loss(input.float(), target)``;
AMP's autocast does so for ``nll_loss``); fixed twin: ``nll_loss2d_mean_fixed.py``.
Target: float16 pure (the model converted with ``.half()``, as in the thread).
"""
import torch
import torch.nn.functional as F
from torch import nn

CLASSES, SIZE = 11, 256


class Segmenter(nn.Module):
    """A small fully convolutional net scoring every pixel, trained with its loss in forward."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                                  nn.ReLU())
        self.head = nn.Conv2d(16, CLASSES, 1)

    def forward(self, images, labels):
        log_probs = F.log_softmax(self.head(self.body(images)), dim=1)
        return F.nll_loss(log_probs, labels)


def get_model():
    torch.manual_seed(0)
    return Segmenter()


def get_example_inputs():
    torch.manual_seed(0)
    images = torch.randn(1, 3, SIZE, SIZE)
    labels = torch.randint(0, CLASSES, (1, SIZE, SIZE))
    return (images, labels)
