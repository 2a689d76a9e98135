"""PA442 clean twin: the amax reduction group spans data and tensor parallelism (the fix)."""
import transformer_engine.pytorch as te
from megatron import mpu


class ParallelTransformer:
    def __init__(self, layers, recipe):
        self.layers = layers
        self.fp8_recipe = recipe
        self.fp8_group = mpu.get_amax_reduction_group()

    def forward(self, hidden):
        with te.fp8_autocast(enabled=True, fp8_recipe=self.fp8_recipe, fp8_group=self.fp8_group):
            return self.layers(hidden)
