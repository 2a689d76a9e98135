"""PA441 clean twin: a 1024-step amax window and its max (Transformer Engine's defaults since 1.0)."""
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format


def train_step(model, batch, optimizer):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=1024, amax_compute_algo="max")
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
        loss = model(batch).float().mean()
    loss.backward()
    optimizer.step()
