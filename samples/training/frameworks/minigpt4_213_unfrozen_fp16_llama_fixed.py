"""Vision-CAIR/MiniGPT-4 #213, fixed as the thread's answer says: with LLaMA layers unfrozen,
LLaMA is loaded in fp32 (``torch_dtype=torch.float32``), so the runner's GradScaler steps fp32
weights and autocast computes in fp16.

Sources (read):
  https://github.com/Vision-CAIR/MiniGPT-4/issues/213 ("Your issue should get fixed by loading
  LLaMA as torch.float32"; a later comment: it then runs out of memory, the trade the fix makes)

The runner kept ``torch.cuda.amp`` (deprecated since torch 2.4): residual PA409.
"""
import torch
import torch.nn as nn
from transformers import LlamaForCausalLM


class MiniGPT4(nn.Module):
    def __init__(self, llama_model="", unfreeze_last=0):
        super().__init__()
        self.llama_model = LlamaForCausalLM.from_pretrained(
            llama_model,
            torch_dtype=torch.float32,
        )
        for name, param in self.llama_model.named_parameters():
            param.requires_grad = False
        # the user's change: some LLaMA layers trained too
        for layer in self.llama_model.model.layers[len(self.llama_model.model.layers) - unfreeze_last:]:
            for param in layer.parameters():
                param.requires_grad = True
        self.llama_proj = nn.Linear(768, self.llama_model.config.hidden_size)

    def forward(self, samples):
        return self.llama_model(inputs_embeds=self.llama_proj(samples["query_output"]),
                                labels=samples["targets"]).loss


def train(llama_model, data_loader, run_cfg):
    model = MiniGPT4(llama_model, unfreeze_last=2).cuda()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=float(run_cfg.init_lr))
    scaler = torch.cuda.amp.GradScaler() if run_cfg.get("amp", False) else None  # residual: PA409
    use_amp = scaler is not None
    for i, samples in enumerate(data_loader):
        with torch.cuda.amp.autocast(enabled=use_amp):  # residual: PA409
            loss = model(samples)
        if use_amp:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if (i + 1) % run_cfg.accum_grad_iters == 0:
            if use_amp:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            optimizer.zero_grad()
