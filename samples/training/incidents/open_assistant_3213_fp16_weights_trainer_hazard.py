"""LAION-AI/Open-Assistant #3213: "ValueError: Attempting to unscale FP16 gradients." in trainer_sft.

Sources (read):
  https://github.com/LAION-AI/Open-Assistant/issues/3213
  https://github.com/LAION-AI/Open-Assistant/blob/main/model/model_training/utils/utils.py
  (``get_model``: ``dtype = torch.float16`` when ``conf.dtype in ["fp16", "float16"]``, passed as
  ``torch_dtype=dtype`` to ``from_pretrained``)

``python trainer_sft.py --configs galactica-125m webgpt_dataset_only`` failed with the error
above; a maintainer answered "Please try adding `dtype: float32` to the model configuration."
The same ``dtype`` setting loaded the weights in fp16 and turned on the Trainer's fp16 AMP, whose
GradScaler refuses fp16 gradients. The finding should name the condition "when --dtype is
fp16". Under ``--dtype bf16`` the same code trains bf16 weights with the AdamW the Trainer
builds, with no fp32 master copy (PA407, found once the Trainer's optimizer was modelled,
issue 42). Cut down: ``get_model`` as read, the TrainingArguments as the SFT script builds them.
"""
import argparse

import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


def get_model(conf):
    dtype = torch.float32
    if conf.dtype in ["fp16", "float16"]:
        dtype = torch.float16
    elif conf.dtype in ["bf16", "bfloat16"]:
        dtype = torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(conf.model_name, cache_dir=conf.cache_dir, torch_dtype=dtype)  # expect: PA405 [if dtype|fp16|float16]
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
    trainer = Trainer(model=model, args=args, train_dataset=None)  # expect: PA407 [if bf16|bfloat16]
    trainer.train()


if __name__ == "__main__":
    main()
