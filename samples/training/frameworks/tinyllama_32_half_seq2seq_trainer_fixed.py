"""jzhang38/TinyLlama #32, fixed as the maintainer explained: no ``model.half()``; the weights
stay fp32 and the Trainer updates them in fp32, with 16-bit compute only through its mixed
precision flags (``--fp16``/``--bf16`` on the command line: autocast over fp32 weights).

Sources (read):
  https://github.com/jzhang38/TinyLlama/issues/32 (the maintainer: "In mixed-precision
  training, model weight is updated as 32-bit ...")
  jzhang38/TinyLlama sft/finetune.py at 1fe1cf9 (the script as published: no ``.half()``)
"""
import os
from dataclasses import dataclass, field
from typing import Optional

import transformers
from transformers import AutoModelForCausalLM, Seq2SeqTrainer


@dataclass
class ModelArguments:
    model_name_or_path: Optional[str] = field(default="PY007/TinyLlama-1.1B-intermediate-step-240k-503b")
    trust_remote_code: Optional[bool] = field(default=False)


@dataclass
class TrainingArguments(transformers.Seq2SeqTrainingArguments):
    output_dir: str = field(default="./output", metadata={"help": "The output dir for logs and checkpoints"})
    optim: str = field(default="adamw_torch", metadata={"help": "The optimizer to be used"})
    learning_rate: float = field(default=0.0002, metadata={"help": "The learnign rate"})
    max_grad_norm: float = field(default=0.3, metadata={"help": "Gradient clipping max norm"})
    remove_unused_columns: bool = field(default=False)


def get_accelerate_model(args):
    device_map = "auto"
    if os.environ.get("LOCAL_RANK") is not None:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device_map = {"": local_rank}
    model = AutoModelForCausalLM.from_pretrained(
        args.model_name_or_path,
        device_map=device_map,
        trust_remote_code=args.trust_remote_code,
    )
    return model


def train(make_data_module):
    hfparser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args, extra_args = hfparser.parse_args_into_dataclasses(return_remaining_strings=True)
    model = get_accelerate_model(model_args)
    model.config.use_cache = False
    trainer = Seq2SeqTrainer(
        model=model,
        args=training_args,
        **make_data_module(),
    )
    return trainer.train()
