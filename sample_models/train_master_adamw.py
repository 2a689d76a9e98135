"""An AdamW that steps an fp32 master copy of each parameter, kept in its own state.

The clean twins of PA304 and PA305 return it from ``get_optimizer``: the model runs in
bf16/fp16, the optimizer's arithmetic and state (``master``, ``exp_avg``, ``exp_avg_sq``)
are fp32, and the low-precision parameter is the master's rounding after every step (what
apex O2, DeepSpeed and Megatron do). ``check --train`` measures such an optimizer on the
state tensor named ``master``.
"""
import torch


class MasterAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["master"] = p.detach().float().clone()
                    state["exp_avg"] = torch.zeros_like(state["master"])
                    state["exp_avg_sq"] = torch.zeros_like(state["master"])
                master, m, v = state["master"], state["exp_avg"], state["exp_avg_sq"]
                g = p.grad.float()
                state["step"] += 1
                master.mul_(1 - group["lr"] * group["weight_decay"])
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                bias1, bias2 = 1 - beta1 ** state["step"], 1 - beta2 ** state["step"]
                denom = (v.sqrt() / bias2 ** 0.5).add_(group["eps"])
                master.addcdiv_(m, denom, value=-group["lr"] / bias1)
                p.copy_(master)
