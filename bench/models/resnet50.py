"""Bench model: ResNet-50 as torchvision builds it (``torchvision.models.resnet50()``,
``weights=None``), written out here because torchvision has no wheel for torch 2.13.

The architecture is torchvision's v1.5: a 7x7/2 stem, a 3x3/2 max pool, four stages of
bottleneck blocks ([3, 4, 6, 3], widths 64-128-256-512, expansion 4), the stride on the
3x3 convolution, a 1x1 projection (conv + BN) where the shape changes, global average
pooling and a 1000-way ``fc``. Its initialisation is torchvision's: convolutions
``kaiming_normal_(mode="fan_out", nonlinearity="relu")``, every BatchNorm weight 1 and
bias 0, ``fc`` PyTorch's default; no zero-init of the last BN of a block.

Fresh from that init, eval-mode BN is the identity (running mean 0, variance 1) and the
model converts to float16 with an error of 0.03% of its output's range. A trained
ResNet-50's BN statistics are those of its data; ``get_model`` measures them the same way
(``calibrate``: a cumulative average over four batches of two standard-normal images in
training mode, weights unchanged). Then each normalisation rescales its channels by their
measured spread, float16's rounding error grows from block to block (0.05% after the stem,
1.4% by ``layer2.3``) and the converted model leaves the check's tolerance with a max error
of about 3% of the output's range against 1%, although no op is a hazard: the held-out
case of issue 36 (both exporters; there 2%).
"""
import torch
from torch import nn

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride)
EXPANSION = 4


def _conv(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False)


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * EXPANSION
        self.conv1, self.bn1 = _conv(cin, width, 1), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = _conv(width, width, 3, stride), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = _conv(width, cout, 1), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(_conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        cin = 64
        for index, (width, blocks, stride) in enumerate(STAGES, start=1):
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(cin, width, stride if b == 0 else 1))
                cin = width * EXPANSION
            setattr(self, f"layer{index}", nn.Sequential(*layer))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def calibrate(model: nn.Module, batches: int = 4, seed: int = 1) -> nn.Module:
    """Set every BN's running statistics to those of ``batches`` random batches (their
    cumulative average: momentum None), as training on data sets them; back in eval mode."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    generator = torch.Generator().manual_seed(seed)
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(2, 3, 224, 224, generator=generator))
    return model.eval()


def get_model():
    torch.manual_seed(0)
    return calibrate(ResNet50())


def get_example_inputs():
    return (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0)),)
