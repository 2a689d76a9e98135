"""The layer that runs models: capture, apply and check all run them through it.

pytorch/: device moves and named outputs (``execution``), CUDA's autocast policy on any
device (``cuda_autocast``), CUDA's low-precision kernels on CPU (``emulation``), the names
torch calls go by (``ops``). onnx/: ModelProto helpers (``graph``), onnxruntime sessions,
verification and writes (``io``), the float16 conversion (``float16``), CUDA's float16
numerics on onnxruntime's CPU provider (``emulate``), generated inputs (``inputs``).
It imports only ``core``, so every stage above it may import it.
"""
