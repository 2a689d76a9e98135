"""ageron/handson-mlp #36, fixed as the reporter did: fp32 weights, fp16 autocast through
``TrainingArguments(fp16=True)``.

Sources (read):
  https://github.com/ageron/handson-mlp/issues/36 (chapter 14, cells 112-120; "I resolved the
  problem by commenting out the `dtype=torch.float16` ... and adding type casting using the
  TrainerArguments option")
  transformers 5.24.0 trainer_optimizer.py ``_get_adamw_torch`` (``torch.optim.AdamW``, eps =
  ``adam_epsilon`` = 1e-8; ``fused=True`` only for ``optim="adamw_torch_fused"``, the default
  from torch 2.8 on, training_args.py ``default_optim``)

The notebook's cells as one script (datasets as parameters).
"""
from transformers import BertForSequenceClassification, Trainer, TrainingArguments


def train(train_ds, valid_ds, compute_accuracy):
    bert_for_binary_clf = BertForSequenceClassification.from_pretrained(
        "bert-base-uncased",
        num_labels=2)
    train_args = TrainingArguments(
        output_dir="./my_bert_binary_clf", num_train_epochs=2, learning_rate=2e-5, weight_decay=0.01,
        per_device_train_batch_size=32, per_device_eval_batch_size=32, eval_strategy="epoch",
        save_strategy="epoch", load_best_model_at_end=True, metric_for_best_model="accuracy", report_to="none",
        fp16=True)
    trainer = Trainer(
        bert_for_binary_clf, train_args, train_dataset=train_ds, eval_dataset=valid_ds,
        compute_metrics=compute_accuracy)
    return trainer.train()
