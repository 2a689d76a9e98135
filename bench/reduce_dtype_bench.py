"""PA421's failure, measured on CPU: the error of a data-parallel gradient sum done in bf16
(or fp16) grows with the number of ranks.

A ring reduce-scatter sends each chunk round the ring: every hop adds one rank's gradient
to the partial sum and sends the result on in the reduce dtype, so the partial sum is
rounded N-1 times (NCCL 2.27+ adds in fp32 inside a hop, the rounding between hops stays).
This emulates that order for N ranks whose gradients share a signal and differ by noise,
as data-parallel gradients do, and reports the relative error of the averaged gradient
against the exact (float64) mean, for the reduce dtype in fp32, bf16 and fp16.

    python bench/reduce_dtype_bench.py [--size 200000] [--ranks 8 96 384]
"""
from __future__ import annotations

import argparse

import torch


def ring_mean(grads: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """The mean of ``grads`` summed hop by hop, the partial sum held in ``dtype`` between hops."""
    partial = grads[0].to(dtype)
    for grad in grads[1:]:
        partial = (partial.float() + grad.to(dtype).float()).to(dtype)
    return partial.float() / len(grads)


def relative_error(ranks: int, size: int, dtype: torch.dtype, seed: int = 0) -> float:
    gen = torch.Generator().manual_seed(seed)
    signal = torch.randn(size, generator=gen) * 1e-3
    grads = [signal + torch.randn(size, generator=gen) * 3e-3 for _ in range(ranks)]
    exact = torch.stack([g.double() for g in grads]).mean(0)
    got = ring_mean(grads, dtype).double()
    return float((got - exact).norm() / exact.norm())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 96, 384])
    args = parser.parse_args(argv)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    print("| ranks | " + " | ".join(f"{name} reduce: rel. error" for name in dtypes) + " |")
    print("|---:|" + "---:|" * len(dtypes))
    for ranks in args.ranks:
        errors = [relative_error(ranks, args.size, dtype) for dtype in dtypes.values()]
        print(f"| {ranks} | " + " | ".join(f"{e:.2e}" for e in errors) + " |")


if __name__ == "__main__":
    main()
