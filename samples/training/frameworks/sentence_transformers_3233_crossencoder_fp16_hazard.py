"""sentence-transformers #3233: "CrossEncoder Returns nans after training when loaded with
torch.float16": the model is loaded in fp16 (``automodel_args``) and ``CrossEncoder.fit``
trains it with the AdamW it builds itself, over fp16 weights with no fp32 master copy.

Sources (read):
  https://github.com/huggingface/sentence-transformers/issues/3233 (the reporter's script,
  below; "I can load all-mpnet-base-v2 in float32, but when I use bigger models ... Memory usage
  issue is a big deal")
  sentence-transformers ``CrossEncoder.fit`` (v3): ``optimizer_class=torch.optim.AdamW`` over
  ``self.model.named_parameters()``; ``use_amp=True`` trains under autocast with a GradScaler

The reporter's script, with the data as parameters.
"""
import math

import torch
from sentence_transformers import CrossEncoder


def train(train_dataloader):
    automodel_args = {"torch_dtype": torch.float16}
    model = CrossEncoder("sentence-transformers/all-mpnet-base-v2", num_labels=1,  # expect: PA407
                         classifier_dropout=0.1, automodel_args=automodel_args)
    num_epochs = 2
    warmup_steps = math.ceil(len(train_dataloader) * num_epochs * 0.1)
    model.fit(train_dataloader=train_dataloader, epochs=num_epochs, warmup_steps=warmup_steps, output_path=None)
    return model.predict([["I am happy", "I am sad"], ["I am happy", "I am sad"]])
