"""Vision-CAIR/MiniGPT-4 #213 "ValueError: Attempting to unscale FP16 gradients.": MiniGPT-4
loads its LLaMA with ``torch_dtype=torch.float16`` and freezes it, which is right while it is
frozen; a user who unfroze some of its layers trained those fp16 weights with the runner's
``amp: True``, whose GradScaler refuses their gradients.

Sources (read):
  https://github.com/Vision-CAIR/MiniGPT-4/issues/213 ("Something goes wrong when unfreezing some
  layers of LLM"; the answer: "The framework is using torch.cuda.amp.autocast during training,
  and LLaMA is loaded (by default) from a pretrained checkpoint using torch.float16 (please see
  Line 97 in mini_gpt4.py) ... Your issue should get fixed by loading LLaMA as torch.float32")
  MiniGPT-4 at 322ed18: minigpt4/models/mini_gpt4.py ``MiniGPT4.__init__`` (line 97:
  ``LlamaForCausalLM.from_pretrained(llama_model, torch_dtype=torch.float16)``, then
  ``param.requires_grad = False`` over its parameters), minigpt4/runners/runner_base.py
  (``torch.cuda.amp.GradScaler()`` when ``run_cfg.amp``, ``torch.optim.AdamW`` over the
  parameters that require grad), minigpt4/tasks/base_task.py ``_train_inner_loop``

The model, the runner and the task cut down to one file (the ViT, the Q-Former and the
prompt handling left out); which layers the user unfroze is not in the issue (screenshots),
so the last ``unfreeze_last`` decoder layers stand for them.
"""
import torch
import torch.nn as nn
from transformers import LlamaForCausalLM


class MiniGPT4(nn.Module):
    def __init__(self, llama_model="", unfreeze_last=0):
        super().__init__()
        self.llama_model = LlamaForCausalLM.from_pretrained(
            llama_model,
            torch_dtype=torch.float16,  # expect: PA405
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
    scaler = torch.cuda.amp.GradScaler() if run_cfg.get("amp", False) else None  # expect: PA409
    use_amp = scaler is not None
    for i, samples in enumerate(data_loader):
        with torch.cuda.amp.autocast(enabled=use_amp):  # expect: PA409
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
