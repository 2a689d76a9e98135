"""A hand-written sigmoid focal loss in an fp16 detector: log(1 - p) of a saturated sigmoid.

Thread: https://github.com/open-mmlab/mmcv/issues/1488 ("SigmodFocalLoss return NAN"): on
fp16 class scores, "the value 9.3906 is too large so that 1 - p approximately equals to 0".
The same formula in Python is the one ATSS / maskrcnn-benchmark ship as
``sigmoid_focal_loss_cpu`` (https://github.com/sfzhang15/ATSS/issues/89):
``(1 - p) ** gamma * log(p)`` and ``p ** gamma * log(1 - p)`` with ``p = sigmoid(logits)``.
What failed: in fp16 sigmoid(9.39) rounds to exactly 1.0 (fp16's spacing below 1 is 4.9e-4),
``log(1 - p)`` is -inf, and the classes whose term is masked out contribute 0 * -inf = NaN.
Upstream fix: the loss from the logits themselves, in fp32, as the stable formulation
``torchvision.ops.sigmoid_focal_loss`` uses (``binary_cross_entropy_with_logits`` times
``(1 - p_t) ** gamma``; fixed twin: ``focal_loss_fixed.py``).
Target: float16 pure (mmcv's fp16 training converts the detector with ``.half()``).
"""
import torch
from torch import nn

C, GAMMA, ALPHA = 8, 2.0, 0.25


def sigmoid_focal_loss(logits, targets):
    """ATSS's ``sigmoid_focal_loss_cpu`` (targets: class index 1..C, 0 background)."""
    class_range = torch.arange(1, C + 1, device=logits.device).unsqueeze(0)
    t = targets.unsqueeze(1)
    p = torch.sigmoid(logits)
    term1 = (1 - p) ** GAMMA * torch.log(p)
    term2 = p ** GAMMA * torch.log(1 - p)
    positive = (t == class_range).to(logits.dtype)
    negative = ((t != class_range) & (t >= 0)).to(logits.dtype)
    return (-positive * term1 * ALPHA - negative * term2 * (1 - ALPHA)).sum()


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.cls_head = nn.Linear(32, C)
        with torch.no_grad():  # a confident head: some class scores near 9-10 (the thread's 9.39)
            self.cls_head.weight.mul_(8.0)

    def forward(self, x, targets):
        return sigmoid_focal_loss(self.cls_head(self.backbone(x)), targets)


def get_model():
    return Detector()


def get_example_inputs():
    torch.manual_seed(0)
    x = torch.randn(64, 16) * 2
    targets = torch.randint(0, C + 1, (64,))
    return (x, targets)
