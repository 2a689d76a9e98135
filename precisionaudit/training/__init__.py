"""Training code read statically: training scripts (parsed with LibCST, never imported or
run), DeepSpeed JSON and accelerate YAML configs, audited by the PA4xx rules.

Nothing here imports torch: a pre-commit hook over training scripts stays fast.
``audit.audit_file`` is the one entry point; a rule's check lives in
``checks/paNNN_<name>.py`` and registers with ``registry.training_check``.
"""
