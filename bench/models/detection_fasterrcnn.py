"""A torchvision-style detection model: Faster R-CNN, ResNet-50 + FPN, one 800x800 image.

Written in plain torch with torchvision's ``fasterrcnn_resnet50_fpn`` shapes (torchvision is
not usable here): frozen-BatchNorm ResNet-50, a 256-channel FPN with a max-pooled level,
an RPN (3 anchors per place, 1000 proposals per level, then 1000 after NMS), multi-scale
RoIAlign (7x7, 2x2 samples, done with ``grid_sample``), a two-layer 1024 box head and a
91-class predictor with per-class NMS. Random weights, nothing downloaded.

NMS and the proposal filtering are data-dependent (boolean masks, a fixed-point loop that
stops when the kept set no longer changes), so fake tensors cannot run the forward and the
scan falls back to an eager run on real tensors: the benchmark of that fallback.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

IMAGE = 800
NUM_CLASSES = 91
ANCHOR_SIZES = (32, 64, 128, 256, 512)
ASPECTS = (0.5, 1.0, 2.0)
PRE_NMS, POST_NMS, DETECTIONS = 1000, 1000, 100
BBOX_CLIP = math.log(1000.0 / 16)


class FrozenBatchNorm2d(nn.Module):
    """torchvision.ops.FrozenBatchNorm2d: BatchNorm with fixed statistics, as detection uses."""

    def __init__(self, n):
        super().__init__()
        for name, value in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0), ("running_var", 1.0)):
            self.register_buffer(name, torch.full((n,), value))

    def forward(self, x):
        scale = self.weight * (self.running_var + 1e-5).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale.reshape(1, -1, 1, 1) + shift.reshape(1, -1, 1, 1)


def conv_bn(cin, cout, k, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), FrozenBatchNorm2d(cout))


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1, self.conv2, self.conv3 = conv_bn(cin, width, 1), conv_bn(width, width, 3, stride), conv_bn(width, cout, 1)
        self.conv3[1].weight.fill_(0.2)  # keeps the residual stream's growth modest, as trained nets do
        self.downsample = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.conv1(x))
        out = F.relu(self.conv2(out))
        return F.relu(self.conv3(out) + identity)


class ResNet50(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 64, 7, 2)
        layers, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            layer = []
            for i in range(blocks):
                layer.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
            layers.append(nn.Sequential(*layer))
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.stem(x)), 3, 2, 1)
        feats = []
        for layer in self.layers:
            x = layer(x)
            feats.append(x)
        return feats  # strides 4, 8, 16, 32


class FPN(nn.Module):
    def __init__(self, channels=(256, 512, 1024, 2048), out=256):
        super().__init__()
        self.inner = nn.ModuleList(nn.Conv2d(c, out, 1) for c in channels)
        self.layer = nn.ModuleList(nn.Conv2d(out, out, 3, padding=1) for _ in channels)

    def forward(self, feats):
        last = self.inner[-1](feats[-1])
        results = [self.layer[-1](last)]
        for i in range(len(feats) - 2, -1, -1):
            lateral = self.inner[i](feats[i])
            last = lateral + F.interpolate(last, size=lateral.shape[-2:], mode="nearest")
            results.insert(0, self.layer[i](last))
        results.append(F.max_pool2d(results[-1], 1, 2, 0))  # LastLevelMaxPool
        return results  # strides 4, 8, 16, 32, 64


def anchors_for(feature, stride, size):
    h, w = feature.shape[-2:]
    ratios = torch.tensor(ASPECTS, device=feature.device)
    hs, ws = size * ratios.sqrt(), size / ratios.sqrt()
    base = torch.stack([-ws, -hs, ws, hs], dim=1) / 2
    ys = (torch.arange(h, device=feature.device, dtype=torch.float32) * stride)
    xs = (torch.arange(w, device=feature.device, dtype=torch.float32) * stride)
    yy, xx = torch.meshgrid(ys, xs, indexing="ij")
    shifts = torch.stack([xx, yy, xx, yy], dim=-1).reshape(-1, 1, 4)
    return (shifts + base).reshape(-1, 4)


def decode(deltas, boxes, weights=(1.0, 1.0, 1.0, 1.0)):
    boxes = boxes.to(deltas.dtype)
    widths, heights = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    cx, cy = boxes[:, 0] + 0.5 * widths, boxes[:, 1] + 0.5 * heights
    wx, wy, ww, wh = weights
    dx, dy = deltas[..., 0::4] / wx, deltas[..., 1::4] / wy
    dw = (deltas[..., 2::4] / ww).clamp(max=BBOX_CLIP)
    dh = (deltas[..., 3::4] / wh).clamp(max=BBOX_CLIP)
    pcx, pcy = dx * widths[:, None] + cx[:, None], dy * heights[:, None] + cy[:, None]
    pw, ph = dw.exp() * widths[:, None], dh.exp() * heights[:, None]
    return torch.stack([pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph], dim=-1).flatten(1)


def box_iou(a, b):
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt, rb = torch.max(a[:, None, :2], b[None, :, :2]), torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(dim=-1)
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def nms(boxes, scores, threshold):
    """Greedy NMS (torchvision.ops.nms's result) without a per-box loop: box j is kept when
    no kept higher-scored box overlaps it more than ``threshold``; iterated from 'all kept'
    until the kept set stops changing (a data-dependent loop)."""
    order = scores.argsort(descending=True)
    boxes = boxes[order].float()
    overlaps = (box_iou(boxes, boxes) > threshold).triu(1)
    keep = torch.ones(len(boxes), dtype=torch.bool, device=boxes.device)
    while True:
        new = ~(overlaps & keep[:, None]).any(dim=0)
        if torch.equal(new, keep):
            return order[keep]
        keep = new


def batched_nms(boxes, scores, groups, threshold):
    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.int64, device=boxes.device)
    offsets = groups.to(boxes) * (boxes.max() + 1)
    return nms(boxes + offsets[:, None], scores, threshold)


def clip_and_filter(boxes, *rest, min_size=1e-3):
    xs, ys = boxes[:, 0::2].clamp(0, IMAGE), boxes[:, 1::2].clamp(0, IMAGE)
    boxes = torch.stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1]], dim=1)
    keep = ((boxes[:, 2] - boxes[:, 0]) >= min_size) & ((boxes[:, 3] - boxes[:, 1]) >= min_size)
    return (boxes[keep], *(r[keep] for r in rest))


class RPN(nn.Module):
    def __init__(self, channels=256):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.cls_logits = nn.Conv2d(channels, len(ASPECTS), 1)
        self.bbox_pred = nn.Conv2d(channels, 4 * len(ASPECTS), 1)
        for layer in (self.conv, self.cls_logits, self.bbox_pred):
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.zeros_(layer.bias)

    def forward(self, features):
        boxes, scores, levels = [], [], []
        for level, (feature, size) in enumerate(zip(features, ANCHOR_SIZES)):
            t = F.relu(self.conv(feature))
            logits = self.cls_logits(t).permute(0, 2, 3, 1).reshape(-1)
            deltas = self.bbox_pred(t).permute(0, 2, 3, 1).reshape(-1, 4)
            anchors = anchors_for(feature, IMAGE // feature.shape[-1], size)
            top = logits.topk(min(PRE_NMS, logits.numel())).indices
            boxes.append(decode(deltas[top], anchors[top]))
            scores.append(logits[top])
            levels.append(torch.full_like(top, level))
        boxes, scores, levels = torch.cat(boxes), torch.cat(scores).sigmoid(), torch.cat(levels)
        boxes, scores, levels = clip_and_filter(boxes, scores, levels)
        keep = batched_nms(boxes, scores, levels, 0.7)[:POST_NMS]
        return boxes[keep]


class MultiScaleRoIAlign(nn.Module):
    """torchvision's MultiScaleRoIAlign (7x7, sampling ratio 2) over the four finest levels."""

    def __init__(self, output=7, sampling=2):
        super().__init__()
        self.output, self.sampling = output, sampling

    def forward(self, features, boxes):
        areas = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).clamp(min=1e-6)
        levels = (4 + torch.log2(areas.sqrt() / 224 + 1e-6)).floor().clamp(2, 5).long() - 2
        channels = features[0].shape[1]
        result = boxes.new_zeros((len(boxes), channels, self.output, self.output), dtype=features[0].dtype)
        n = self.output * self.sampling
        steps = (torch.arange(n, device=boxes.device, dtype=boxes.dtype) + 0.5) / n
        for level in range(4):
            index = torch.nonzero(levels == level).flatten()
            if index.numel() == 0:
                continue
            feature, b = features[level], boxes[index]
            xs = b[:, 0:1] + steps * (b[:, 2:3] - b[:, 0:1])
            ys = b[:, 1:2] + steps * (b[:, 3:4] - b[:, 1:2])
            grid = torch.stack([xs[:, None, :].expand(-1, n, -1), ys[:, :, None].expand(-1, -1, n)], dim=-1)
            grid = (grid / IMAGE * 2 - 1).reshape(1, -1, n, 2).to(feature.dtype)
            sampled = F.grid_sample(feature, grid, align_corners=False)  # 1, C, K*n, n
            sampled = sampled.reshape(channels, len(index), n, n).transpose(0, 1)
            result[index] = F.avg_pool2d(sampled, self.sampling).to(result.dtype)
        return result


class BoxHead(nn.Module):
    def __init__(self, channels=256, hidden=1024):
        super().__init__()
        self.fc6, self.fc7 = nn.Linear(channels * 49, hidden), nn.Linear(hidden, hidden)
        self.cls_score, self.bbox_pred = nn.Linear(hidden, NUM_CLASSES), nn.Linear(hidden, NUM_CLASSES * 4)

    def forward(self, x):
        x = F.relu(self.fc7(F.relu(self.fc6(x.flatten(1)))))
        return self.cls_score(x), self.bbox_pred(x)


class FasterRCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone, self.fpn, self.rpn = ResNet50(), FPN(), RPN()
        self.roi_align, self.box_head = MultiScaleRoIAlign(), BoxHead()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1))

    def forward(self, image):
        features = self.fpn(self.backbone((image - self.mean) / self.std))
        proposals = self.rpn(features)
        logits, deltas = self.box_head(self.roi_align(features, proposals))
        scores = F.softmax(logits, -1)[:, 1:]
        boxes = decode(deltas, proposals, (10.0, 10.0, 5.0, 5.0)).reshape(len(proposals), NUM_CLASSES, 4)[:, 1:]
        labels = torch.arange(1, NUM_CLASSES, device=image.device).expand(len(proposals), -1)
        boxes, scores, labels = boxes.reshape(-1, 4), scores.reshape(-1), labels.reshape(-1)
        confident = scores > 0.05
        boxes, scores, labels = clip_and_filter(boxes[confident], scores[confident], labels[confident])
        keep = batched_nms(boxes, scores, labels, 0.5)[:DETECTIONS]
        return boxes[keep], scores[keep], labels[keep]


def get_model():
    torch.manual_seed(0)
    return FasterRCNN().eval()


def get_example_inputs():
    return (torch.rand(1, 3, IMAGE, IMAGE),)
