"""precisionaudit: find mixed-precision (fp16/bf16) hazards in PyTorch and ONNX models."""
__version__ = "0.1.0"
