"""PA407 clean twin: fp32 master weights with bf16 autocast (and an fp16 copy only for
inference, with no optimizer)."""
import torch
from transformers import AutoModelForCausalLM


class Finetuner:
    def __init__(self, name):
        self.model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32).cuda()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0.0)

    def training_step(self, batch):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.model(**batch).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss

    def export(self, name):
        served = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16).eval()
        return served
