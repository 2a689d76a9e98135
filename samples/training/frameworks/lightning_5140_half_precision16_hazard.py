"""Lightning #5140: "Attempting to unscale FP16 gradients": ``model.half()`` before
``Trainer(precision=16)``.

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/5140 (the reporter's ``train()``)
  lightning 2.6.6 plugins/precision/amp.py: precision 16 is "16-mixed", a ``MixedPrecision``
  plugin whose ``optimizer_step`` calls ``scaler.unscale_``, which refuses fp16 gradients.

"I want to train and save my model with 16-bit precision": the module is made fp16 by hand
and the Trainer's AMP GradScaler then raises at the first step. The reporter's function, cut
down (folds kept).
"""
import pytorch_lightning as pl


def train(config, Model, MyDataModule):
    model = Model(**config)
    model.half()  # expect: PA405
    data_module = MyDataModule(config["train_root"], config["folds"], config["size"],
                               config["batch_size"], config["num_workers"])
    for i in range(config["folds"]):
        model.set_net(i)
        trainer = pl.Trainer(max_epochs=config["epochs"], gpus=[0, ], precision=16)
        trainer.fit(model=model,
                    train_dataloader=data_module.train_dataloader(i),
                    val_dataloaders=data_module.val_dataloader(i))
