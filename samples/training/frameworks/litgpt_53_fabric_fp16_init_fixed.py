"""Lightning-AI/litgpt #53, fixed as a maintainer proposes in issue #1252: the model is made in
fp32 (``EmptyInitOnDevice(..., dtype=torch.float32)``, what the script itself passes for
"32-true" from b1101fc2 on), so under ``precision="16-mixed"`` Fabric computes in fp16 under
autocast and its GradScaler unscales fp32 gradients.

Sources (read):
  https://github.com/Lightning-AI/litgpt/issues/53 (the failure)
  https://github.com/Lightning-AI/litgpt/issues/1252 ("Cast the weighs to fp32 in this case so that
  mixed precision training does something useful")
  Lightning-AI/litgpt finetune_adapter.py at b1101fc2 (``dtype=torch.float32 if
  fabric._precision.precision == "32-true" else torch.bfloat16``)
"""
import lightning as L
import torch
from lightning.fabric.strategies import DeepSpeedStrategy

from lit_parrot.adapter import Config, Parrot, mark_only_adapter_as_trainable
from lit_parrot.utils import EmptyInitOnDevice, lazy_load

devices = 1
learning_rate = 9e-3
weight_decay = 0.02
micro_batch_size = 4
gradient_accumulation_steps = 16
max_iters = 50000
ds_config = {
    "train_micro_batch_size_per_gpu": micro_batch_size,
    "gradient_accumulation_steps": gradient_accumulation_steps,
    "zero_optimization": {"stage": 2},
}


def main(checkpoint_dir, get_batch, loss_fn):
    fabric = L.Fabric(
        accelerator="cuda",
        devices=devices,
        strategy=(DeepSpeedStrategy(config=ds_config) if devices > 1 else "auto"),
        precision="16-mixed",
    )
    fabric.launch()
    config = Config.from_name(name=checkpoint_dir.name)
    with EmptyInitOnDevice(device=fabric.device, dtype=torch.float32):
        model = Parrot(config)
    with lazy_load(checkpoint_dir / "lit_model.pth") as checkpoint:
        model.load_state_dict(checkpoint, strict=False)
    mark_only_adapter_as_trainable(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    model, optimizer = fabric.setup(model, optimizer)
    train(fabric, model, optimizer, get_batch, loss_fn)


def train(fabric, model, optimizer, get_batch, loss_fn):
    for iter_num in range(max_iters):
        input_ids, targets = get_batch(fabric)
        with fabric.no_backward_sync(model, enabled=((iter_num + 1) % gradient_accumulation_steps != 0)):
            logits = model(input_ids)
            loss = loss_fn(logits, targets)
            fabric.backward(loss / gradient_accumulation_steps)
        if (iter_num + 1) % gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
