"""PA301 clean twin: the same VAE-decoder-style stack (same checkpoint keys) run in fp32
inside an autocast region, as diffusers' `force_upcast` does for the SDXL VAE."""
import torch
from pa301_vae_decoder_hazard import Decoder, get_example_inputs, trained_state_dict  # noqa: F401


class UpcastDecoder(Decoder):
    def forward(self, z):
        with torch.autocast("cuda", enabled=False):
            return super().forward(z.float())


def get_model():
    torch.manual_seed(0)
    return UpcastDecoder()
