"""PA407 hazard (vllm speculators PR #765; ml-by-hand PR #85): a pure-bf16 model trained with
a plain torch.optim.AdamW at lr=1e-4: every norm weight (1.0) stays exactly 1.0, because
the update is below half an ulp (2^-8)."""
import torch
from transformers import AutoModelForCausalLM


class Finetuner:
    def __init__(self, name):
        self.model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16).cuda()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0.0)

    def training_step(self, batch):
        loss = self.model(**batch).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss
