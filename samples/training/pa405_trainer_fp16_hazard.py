"""PA405 hazard through the HF Trainer: fp16 weights loaded, then TrainingArguments(fp16=True).
accelerate's GradScaler raises "Attempting to unscale FP16 gradients." at the first step."""
import torch
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments


def main(train_dataset):
    model = AutoModelForSequenceClassification.from_pretrained(
        "distilbert-base-uncased", num_labels=2, torch_dtype=torch.float16)
    args = TrainingArguments(output_dir="out", fp16=True, per_device_train_batch_size=16)
    trainer = Trainer(model=model, args=args, train_dataset=train_dataset)
    trainer.train()
