"""torchvision's box_iou on fp16 boxes: the area of a box larger than 256 x 256 pixels is inf.

Thread: https://github.com/pytorch/vision/issues/3371 (numeric overflow of IoU / NMS on
float16 boxes; "when the type of boxes is torch.float16, overflow easily happens",
https://github.com/pytorch/vision/pull/3385), fixed by
https://github.com/pytorch/vision/pull/3383 ("Fix NMS and IoU overflows for fp16").
What failed: ``box_area`` is ``(x2 - x1) * (y2 - y1)`` in the boxes' dtype, and
``_box_inter_union`` multiplies the overlap's width and height the same way. In pixel
coordinates a 300 x 300 box has area 90000, past fp16's 65504: the area and the union are
inf, and the IoU of large boxes is 0 (or inf/inf = NaN when the overlap overflows too), so
matching and NMS drop the large objects of an fp16 detector.
Upstream fix: ``_upcast`` the coordinates' differences to fp32 before the products, in
``box_area`` and ``_box_inter_union`` (fixed twin: ``box_iou_area_fixed.py``).
Target: float16 pure (a detector run with ``.half()``).
"""
import torch
from torch import nn

IMAGE = 512.0


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    """torchvision.ops.box_iou before PR #3383."""
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
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
