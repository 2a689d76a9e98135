"""LAION-AI/Open-Assistant #3213, fixed: fp32 weights, with the Trainer's fp16 AMP on top.

Source (read): https://github.com/LAION-AI/Open-Assistant/issues/3213 - "Please try adding
`dtype: float32` to the model configuration."

The maintainer's advice is a config change (weights in float32). Written here as the code-level
equivalent, so that the twin differs in code: the weights always load in fp32 and the flag only
selects the Trainer's mixed precision, which is the documented AMP setup (fp32 master weights,
fp16 compute, GradScaler inside the Trainer).
"""
import argparse

import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


def get_model(conf):
    model = AutoModelForCausalLM.from_pretrained(conf.model_name, cache_dir=conf.cache_dir, torch_dtype=torch.float32)
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name", default="facebook/galactica-125m")
    parser.add_argument("--cache_dir", default=None)
    parser.add_argument("--dtype", default="fp16")
    parser.add_argument("--output_dir", default="out")
    conf = parser.parse_args()

    model = get_model(conf)
    args = TrainingArguments(
        output_dir=conf.output_dir,
        fp16=conf.dtype in ["fp16", "float16"],
        bf16=conf.dtype in ["bf16", "bfloat16"],
        max_grad_norm=2.0,
        learning_rate=1e-5,
    )
    trainer = Trainer(model=model, args=args, train_dataset=None)
    trainer.train()


if __name__ == "__main__":
    main()
