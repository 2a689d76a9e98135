"""The Hugging Face Trainer (transformers, and TRL's trainers built on it): the optimizer it
builds when the script gives none, and the precision flags of its arguments.

Read in transformers 5.24.0:

- ``Trainer.create_optimizer`` (trainer.py) builds ``get_optimizer_cls_and_kwargs(args,
  model)`` (trainer_optimizer.py) over the model's parameters unless ``optimizers=(opt,
  sched)`` was passed; ``_get_adamw_torch`` makes ``torch.optim.AdamW`` with ``eps =
  args.adam_epsilon`` and, for ``optim="adamw_torch_fused"``, ``fused=True``.
- ``TrainingArguments.optim`` defaults to ``"adamw_torch_fused"`` where torch >= 2.8 and to
  ``"adamw_torch"`` before (training_args.py ``default_optim``); ``adam_epsilon`` defaults to
  1e-8.
- ``fp16=True`` trains under autocast with accelerate's GradScaler (PA405 when the weights
  are fp16); ``bf16=True`` under bf16 autocast, no scaler; neither: the model trains in the
  dtype it was loaded in. The parameters are never converted to fp32 by the Trainer, so an
  fp16/bf16 model's AdamW has no fp32 master copy either way.
- ``deepspeed=...`` and ``fsdp=...`` hand the optimizer and its master weights to DeepSpeed
  or FSDP: not this table's.
"""
from __future__ import annotations

#: the packages whose ``...Trainer`` classes build their optimizer this way
PACKAGES = ("transformers", "trl")
#: ``optim=`` -> (torch.optim class, fused): the torch optimizers the Trainer builds
#: (trainer_optimizer.py ``_OPTIMIZER_HANDLERS``); any other value is not a torch.optim one
OPTIMS = {"adamw_torch": ("AdamW", False), "adamw_torch_fused": ("AdamW", True),
          "sgd": ("SGD", False), "adagrad": ("Adagrad", False), "rmsprop": ("RMSprop", False)}
#: the default ``optim`` by torch version (training_args.py ``default_optim``)
DEFAULT_OPTIMS = {"torch >= 2.8": "adamw_torch_fused", "torch < 2.8": "adamw_torch"}
#: the condition under which the default optimizer is the unfused AdamW
UNFUSED_DEFAULT = "the Trainer's default optim is adamw_torch (torch < 2.8)"
#: ``TrainingArguments.adam_epsilon``'s default
ADAM_EPSILON = 1e-8
#: arguments that hand the optimizer to DeepSpeed or FSDP (they keep fp32 master weights)
DELEGATES = ("deepspeed", "fsdp", "fsdp_config")
#: where a finding says the optimizer came from
SOURCE = "Trainer.create_optimizer -> trainer_optimizer.py _get_adamw_torch"
