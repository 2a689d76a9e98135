"""Lightning #5140, fixed: no ``model.half()``: ``precision=16`` runs the forward under fp16
autocast over fp32 weights, which its GradScaler can unscale.

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/5140 (closed: fp16 training is what
  ``precision=16`` does; saving in fp16 is a separate conversion of the saved copy)
"""
import pytorch_lightning as pl


def train(config, Model, MyDataModule):
    model = Model(**config)
    data_module = MyDataModule(config["train_root"], config["folds"], config["size"],
                               config["batch_size"], config["num_workers"])
    for i in range(config["folds"]):
        model.set_net(i)
        trainer = pl.Trainer(max_epochs=config["epochs"], gpus=[0, ], precision=16)
        trainer.fit(model=model,
                    train_dataloader=data_module.train_dataloader(i),
                    val_dataloaders=data_module.val_dataloader(i))
