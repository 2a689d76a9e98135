"""PyTorch forum "Adam+Half Precision = NaNs?": a ``.half()`` net with a default-eps Adam.

Sources (read):
  https://discuss.pytorch.org/t/adam-half-precision-nans/1765
  https://github.com/afiaka87/glide-finetune/issues/5 (links the thread for the same NaNs)

"I've been running into the sudden appearance of NaNs when I attempt to train using Adam and
Half (float16) precision; my nets train just fine on half precision with SGD+nesterov momentum,
and they train just fine with single precision (float32) and Adam". Adam Paszke: "It's probably
a 0 division somewhere. Have you tried using a much larger eps (say 1e-4)? The default 1e-8 is
rounded to 0 in half precision." The reporter first fixed it "by just hanging onto fp32 copies
of the parameters and keeping all of the Adam values in fp32" (and later wrote that eps was the
culprit). Minimal reproduction of the setup the thread describes.
"""
import torch
import torch.nn.functional as F
from torch import optim


def train(net, loader, lr: float = 1e-3, epochs: int = 1):
    net = net.cuda().half()
    optimizer = optim.Adam(net.parameters(), lr=lr)  # expect: PA406, PA407
    for _ in range(epochs):
        for x, y in loader:
            x, y = x.cuda().half(), y.cuda()
            optimizer.zero_grad()
            loss = F.cross_entropy(net(x).float(), y)
            loss.backward()
            optimizer.step()
