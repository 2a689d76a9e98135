"""jzhang38/TinyLlama #32: "eval loss become nan after a single batch": the SFT script
(sft/finetune.py, qlora's layout) changed to ``model = model.half()`` after
``from_pretrained`` to fit four RTX 3090s, then trained by ``Seq2SeqTrainer`` with the
script's own ``optim="adamw_torch"`` and no ``--fp16``: a torch AdamW steps the fp16 weights
themselves (no fp32 master copy, eps 1e-8 rounds to 0 in fp16). "the training loss becomes 0
after a single batch, and the evaluation loss is nan".

Sources (read):
  https://github.com/jzhang38/TinyLlama/issues/32 (the reporter's change; the maintainer: "I
  think you conflate the idea of mixed-precision training and half-precision training. In
  mixed-precision training, model weight is updated as 32-bit ...")
  jzhang38/TinyLlama sft/finetune.py at 1fe1cf9 (the script the reporter ran) and sft/script.sh
  (its command line: no --fp16/--bf16, no --deepspeed)
  transformers 5.24.0 trainer_optimizer.py ``_get_adamw_torch`` (``torch.optim.AdamW``, eps =
  ``adam_epsilon`` = 1e-8, unfused for ``optim="adamw_torch"``)

Cut down to the arguments, the model and the Trainer; the data module is a parameter.
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
    model = model.half()
    return model


def train(make_data_module):
    hfparser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args, extra_args = hfparser.parse_args_into_dataclasses(return_remaining_strings=True)
    model = get_accelerate_model(model_args)
    model.config.use_cache = False
    trainer = Seq2SeqTrainer(  # expect: PA406, PA407
        model=model,
        args=training_args,
        **make_data_module(),
    )
    return trainer.train()
