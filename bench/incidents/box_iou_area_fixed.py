"""Fixed twin of ``box_iou_area.py``: the upstream fix of
https://github.com/pytorch/vision/pull/3383 (issue #3371): box widths and heights are upcast
to fp32 (``_upcast``) before the area and overlap products.
"""
import torch
from torch import nn

IMAGE = 512.0


def _upcast(t):
    """Protects from numerical overflows in multiplications by upcasting to the equivalent higher type."""
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


def box_area(boxes):
    boxes = _upcast(boxes)  # the fix
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    """torchvision.ops.box_iou after PR #3383."""
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = _upcast(rb - lt).clamp(min=0)  # the fix
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union


class BoxHead(nn.Module):
    """Predicts boxes in pixels (sigmoid-scaled corners) and matches them to the anchors."""

    def __init__(self):
        super().__init__()
        self.reg = nn.Linear(32, 4)
        sizes = torch.tensor([64.0, 128.0, 300.0, 400.0])
        centre = IMAGE / 2
        self.register_buffer("anchors", torch.stack([centre - sizes / 2, centre - sizes / 2,
                                                     centre + sizes / 2, centre + sizes / 2], dim=1))

    def forward(self, features):
        d = torch.sigmoid(self.reg(features)) * (IMAGE / 2)  # distances to the image centre
        centre = IMAGE / 2
        boxes = torch.stack([centre - d[:, 0], centre - d[:, 1], centre + d[:, 2], centre + d[:, 3]], dim=1)
        return box_iou(boxes, self.anchors)


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.head = BoxHead()

    def forward(self, x):
        return self.head(self.backbone(x)).float()


def get_model():
    return Detector()


def get_example_inputs():
    torch.manual_seed(0)
    return (torch.randn(16, 16) * 3,)
