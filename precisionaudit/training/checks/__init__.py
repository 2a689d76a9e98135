"""The bundled training rules' checks, one module per rule (``pa401_clip_before_unscale.py``).
Importing this package registers them (``registry.training_check``)."""
import importlib
import pkgutil

RULE_MODULES = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("pa"))
for _module in RULE_MODULES:
    importlib.import_module(f"{__name__}.{_module}")
