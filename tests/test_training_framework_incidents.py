"""The judged corpus of incidents in the frameworks that own the training step
(samples/training/frameworks/): documented incidents in Lightning, accelerate, the HF Trainer,
Keras and the code built on them (diffusers, TRL, ...), each a hazard and its fixed twin,
judged exactly as samples/training/incidents/ is (tests/incident_corpus.py):

- a ``*_hazard.py`` reports exactly the (rule, line) pairs its ``# expect: PA4NN`` comments
  mark and no other PA4xx finding; a marker's ``[if a|b]`` words must appear in that finding's
  condition;
- a ``*_fixed.py`` reports none of its hazard's rules, except where ``# residual: PA4NN`` marks
  what the maintainers' fix left in place;
- every file cites its thread, has its twin, and has a row in the corpus's README.
"""
from __future__ import annotations

from incident_corpus import make_tests

#: hazards the rules do not catch, with why (strict: a rule that starts catching one fails
#: its test until the entry is removed here)
KNOWN_MISSES = {
    ("lightning_7078_halftensor_param_hazard.py", "PA405"):
        "the fp16 parameter is made inside a module's __init__ (nn.Parameter(torch.HalfTensor(...))): "
        "a module's dtype is read from its construction and conversions, not from its body",
    ("diffusers_6442_lora_fp16_adapters_hazard.py", "PA405"):
        "the adapters are added after the conversion (unet.add_adapter): which parameters train, and "
        "in which dtype, is unknown from there on",
    ("sentence_transformers_3233_crossencoder_fp16_hazard.py", "PA407"):
        "CrossEncoder.fit builds its own AdamW: sentence-transformers has no table in training/frameworks",
    ("diffusers_13124_validation_downcast_hazard.py", "PA405"):
        "the trained parameters are LoRA adapters added after the U-Net's conversion (unknown from there on), "
        "and the downcast is a pipeline's .to(dtype=...) in the validation helper, over the U-Net the pipeline "
        "was built with: a pipeline's components are not followed",
    ("allennlp_5413_hook_clamp_scaled_hazard.py", "PA401"):
        "the clip is a clamp in a hook registered on each parameter (register_hook), which runs inside the "
        "scaled backward itself: the rules read clip calls on the step's path, not gradient hooks",
    ("lavis_279_unfrozen_fp16_vit_hazard.py", "PA405"):
        "the ViT's weights are made half by assigning l.weight.data = l.weight.data.half() in a function "
        "applied with module.apply, inside the model's constructor: neither is read as a conversion",
    ("tinyllama_32_half_seq2seq_trainer_hazard.py", "PA406"):
        "the Trainer's arguments come from HfArgumentParser.parse_args_into_dataclasses over a TrainingArguments "
        "subclass of the file: the optimizer the Trainer builds is read only from a TrainingArguments(...) call, "
        "and whether --fp16, --deepspeed or --fsdp is given is a command-line value",
    ("tinyllama_32_half_seq2seq_trainer_hazard.py", "PA407"):
        "the same: the Trainer's arguments are parsed from the command line (HfArgumentParser), not constructed",
    ("litgpt_53_fabric_fp16_init_hazard.py", "PA405"):
        "the model is built inside the project's own EmptyInitOnDevice(dtype=torch.float16) context manager, "
        "whose effect on the parameters' dtype is not known from here; PA405 also does not read Fabric's "
        "setup(model, optimizer) under precision='16-mixed' (only Lightning's Trainer and accelerate's prepare)",
    ("minigpt4_213_unfrozen_fp16_llama_hazard.py", "PA405"):
        "the fp16 LLaMA is a submodule loaded in the model's __init__ and made trainable by requires_grad loops: "
        "a module's dtype is read from its construction and conversions, not from its body, and requires_grad "
        "is not followed",
}

globals().update(make_tests(
    "samples/training/frameworks", KNOWN_MISSES, minimum=30,
    contract_ids={f"PA40{i}" for i in range(1, 10)} | {"PA421", "PA422", "PA423", "PA431", "PA432", "PA433"}))
