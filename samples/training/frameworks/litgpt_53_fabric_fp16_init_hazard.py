"""Lightning-AI/litgpt #53 (then lit-parrot): "Get Attempting to unscale FP16 gradients while
finetune on float16": on a GPU without bfloat16 the reporter switched ``finetune_adapter.py``
from ``precision="bf16-mixed"`` to ``"16-mixed"`` and built the model under
``EmptyInitOnDevice(device=fabric.device, dtype=torch.float16)``: every parameter, the adapter's
trainable ones too, is fp16, and Fabric's mixed precision steps the AdamW through a GradScaler
(``_FabricOptimizer.step`` -> ``MixedPrecision.optimizer_step`` -> ``scaler.step``), whose
``unscale_`` refuses fp16 gradients.

Sources (read):
  https://github.com/Lightning-AI/litgpt/issues/53 (the reporter's two changes and the
  traceback: fabric/wrappers.py ``step`` -> plugins/precision/amp.py ``optimizer_step`` ->
  ``self.scaler.step(optimizer)`` -> ``unscale_``)
  Lightning-AI/litgpt finetune_adapter.py at fd641ee0 (the script: ``EmptyInitOnDevice``,
  ``mark_only_adapter_as_trainable``, ``torch.optim.AdamW``, ``fabric.setup``)
  https://github.com/Lightning-AI/litgpt/issues/1252 (a maintainer, on 16-bit weights trained with
  mixed precision: "it's not useful to do mixed precision training"; the first remedy: "Cast the
  weighs to fp32 in this case so that mixed precision training does something useful")

The script's setup and step, cut down (data and validation are parameters).
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
    with EmptyInitOnDevice(device=fabric.device, dtype=torch.float16):  # expect: PA405
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
