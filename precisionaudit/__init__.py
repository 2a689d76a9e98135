"""precisionaudit: find mixed-precision (fp16/bf16) hazards in PyTorch and ONNX models."""
__version__ = "0.1.0"

_LAZY = {"apply_plan": "apply.pytorch", "to_low_precision": "apply.pytorch", "load_plan": "plan.file",
         "PlanError": "plan.file", "apply_keras_plan": "apply.keras", "watch": "watch"}


def __getattr__(name):
    """``precisionaudit.apply_plan`` without importing torch on ``import precisionaudit``."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'precisionaudit' has no attribute {name!r}")
