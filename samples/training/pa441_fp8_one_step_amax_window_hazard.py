"""PA441 hazard: Transformer Engine's pre-1.0 delayed-scaling window of one step."""
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format


def train_step(model, batch, optimizer):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=1, amax_compute_algo="most_recent")
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
        loss = model(batch).float().mean()
    loss.backward()
    optimizer.step()
