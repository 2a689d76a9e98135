"""Training code read statically: training scripts (parsed with CPython's ``ast``, never
imported or run), DeepSpeed JSON and accelerate YAML configs, audited by the PA4xx rules.

Nothing here imports torch, and LibCST only to rewrite (``--fix``): a pre-commit hook over
training scripts stays fast. ``audit.audit_script`` / ``audit.audit_config`` are the entry
points; a rule's check lives in ``checks/paNNN_<name>.py`` and registers with
``registry.training_check`` (and a step rule's decision with ``step.events.step_rule``).
"""
