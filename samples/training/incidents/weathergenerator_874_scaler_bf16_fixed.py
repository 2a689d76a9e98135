"""ecmwf/WeatherGenerator #874, fixed as the issue proposes: no scaling under bf16.

Source (read): https://github.com/ecmwf/WeatherGenerator/issues/874 (open) - "adding a condition
to disable GradScaler when using bf16 mixed precision is necessary."

The scaler is enabled only when the autocast dtype is float16 (a disabled GradScaler passes
``scale``/``step``/``update`` through), the idiom issue 23 lists as correct code.
"""
import numpy as np
import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class Trainer:
    def init(self, cf):
        self.cf = cf
        self.mixed_precision_dtype = DTYPES[cf.attention_dtype]

    def run(self, cf, model, data_loader):
        self.init(cf)
        self.ddp_model = model
        self.data_loader = data_loader
        kappa = cf.batch_size_per_gpu * cf.num_ranks
        beta1 = max(0.5, 1.0 - kappa * (1.0 - 0.9))
        beta2 = 1.0 - kappa * (1.0 - 0.999)
        eps = 1e-08 / np.sqrt(kappa)
        self.optimizer = torch.optim.AdamW(self.ddp_model.parameters(), lr=cf.lr_start, weight_decay=cf.weight_decay, betas=(beta1, beta2), eps=eps)
        self.grad_scaler = torch.amp.GradScaler("cuda", enabled=(self.mixed_precision_dtype == torch.float16))
        for epoch in range(cf.num_epochs):
            self.train(epoch)

    def train(self, epoch):
        cf = self.cf
        self.ddp_model.train()
        self.optimizer.zero_grad()
        for bidx, batch in enumerate(self.data_loader):
            with torch.autocast(device_type="cuda", dtype=self.mixed_precision_dtype, enabled=cf.with_mixed_precision):
                preds = self.ddp_model(batch)
                loss = self.compute_loss(preds, batch)

            # backward pass
            self.grad_scaler.scale(loss).backward()

            # gradient clipping
            self.grad_scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.ddp_model.parameters(), max_norm=cf.grad_clip)

            # optimizer step
            self.grad_scaler.step(self.optimizer)
            self.grad_scaler.update()
            self.optimizer.zero_grad()

    def compute_loss(self, preds, batch):
        return torch.nn.functional.mse_loss(preds, batch["target"])
