"""Fixed twin of ``nll_loss2d_mean.py`` (pytorch/pytorch#29429): the loss computed from fp32
log-probabilities, as the thread advises and as autocast runs ``nll_loss``: the pixel sums and
the weight total never meet fp16.
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
        return F.nll_loss(log_probs.float(), labels)


def get_model():
    torch.manual_seed(0)
    return Segmenter()


def get_example_inputs():
    torch.manual_seed(0)
    images = torch.randn(1, 3, SIZE, SIZE)
    labels = torch.randint(0, CLASSES, (1, SIZE, SIZE))
    return (images, labels)
