"""PyTorch forum "Adam+Half Precision = NaNs?", fixed as the reporter first did: fp32 master copies.

Source (read): https://discuss.pytorch.org/t/adam-half-precision-nans/1765 - "got this working by
just hanging onto fp32 copies of the parameters and keeping all of the Adam values in fp32 ...
this gives the desired memory reduction without any loss of speed over fp32."
Also discussed there: https://github.com/afiaka87/glide-finetune/issues/5

Forward and backward run on the fp16 net; Adam updates fp32 copies (its eps of 1e-8 is exact in
fp32), which are copied back into the fp16 weights after each step.
"""
import torch
import torch.nn.functional as F
from torch import optim


def train(net, loader, lr: float = 1e-3, epochs: int = 1):
    net = net.cuda().half()
    master_params = [p.detach().clone().float().requires_grad_(True) for p in net.parameters()]
    optimizer = optim.Adam(master_params, lr=lr)
    for _ in range(epochs):
        for x, y in loader:
            x, y = x.cuda().half(), y.cuda()
            net.zero_grad()
            loss = F.cross_entropy(net(x).float(), y)
            loss.backward()
            for master, p in zip(master_params, net.parameters()):
                master.grad = p.grad.detach().float()
            optimizer.step()
            with torch.no_grad():
                for master, p in zip(master_params, net.parameters()):
                    p.copy_(master)
