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
}

globals().update(make_tests(
    "samples/training/frameworks", KNOWN_MISSES, minimum=24,
    contract_ids={f"PA40{i}" for i in range(1, 10)} | {"PA421", "PA422", "PA423", "PA431", "PA432", "PA433"}))
