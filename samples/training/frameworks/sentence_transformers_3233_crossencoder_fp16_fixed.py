"""sentence-transformers #3233, fixed: fp32 weights, fp16 compute through ``fit(use_amp=True)``
(autocast and a GradScaler over fp32 master weights): the standard remedy; the thread was read
up to the maintainer's first question, with no code fix in it.

Sources (read):
  https://github.com/huggingface/sentence-transformers/issues/3233 (the reporter's script,
  below; "I can load all-mpnet-base-v2 in float32, but when I use bigger models ... Memory usage
  issue is a big deal")
  sentence-transformers ``CrossEncoder.fit`` (v3): ``optimizer_class=torch.optim.AdamW`` over
  ``self.model.named_parameters()``; ``use_amp=True`` trains under autocast with a GradScaler

The reporter's script, with the data as parameters.
"""
import math

from sentence_transformers import CrossEncoder


def train(train_dataloader):
    model = CrossEncoder("sentence-transformers/all-mpnet-base-v2", num_labels=1, classifier_dropout=0.1)
    num_epochs = 2
    warmup_steps = math.ceil(len(train_dataloader) * num_epochs * 0.1)
    model.fit(train_dataloader=train_dataloader, epochs=num_epochs, warmup_steps=warmup_steps, output_path=None,
              use_amp=True)
    return model.predict([["I am happy", "I am sad"], ["I am happy", "I am sad"]])
