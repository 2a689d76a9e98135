"""PA405 clean twin: the HF Trainer with fp16=True on fp32 weights (mixed precision)."""
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments


def main(train_dataset):
    model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased", num_labels=2)
    args = TrainingArguments(output_dir="out", fp16=True, per_device_train_batch_size=16)
    trainer = Trainer(model=model, args=args, train_dataset=train_dataset)
    trainer.train()
