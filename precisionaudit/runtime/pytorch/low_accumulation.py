"""The places where CUDA keeps a running value in fp16/bf16 rather than in fp32.

Everywhere else CUDA's kernels compute in fp32 and round once (``emulation``). Here they do
not, and the error grows with the number of steps, so the emulation reproduces their order:

- **Scans** (``cumsum``, ``cumprod``, ``logcumsumexp``) run ``scan_dim<scalar_t>``
  (ATen/native/cuda/ScanUtils.cuh, CumsumKernel.cu): the running value is a ``scalar_t``,
  so each step is computed in fp32 and rounded to the low dtype, for fp16 and bf16 alike.
  Which partial results are formed depends on the kernel the shape selects:

  - a scan along an outer dimension (``tensor_kernel_scan_outer_dim``): one thread per
    column, one add after the other (every step rounded);
  - along the innermost dimension (``tensor_kernel_scan_innermost_dim``): tiles of
    ``2 * num_threads_x`` elements scanned with Sklansky's tree, each tile's first element
    given the previous tiles' total; ``num_threads_x`` from ``get_log_num_threads_x_inner_scan``;
  - a tensor with one dimension that is not 1 (``cuda::cub::inclusive_scan``): CUB's device
    scan with its default policy for a 2-byte accumulator of a non-primitive op (128 threads
    x 30 items): each thread sums its items in order, warps combine by Kogge-Stone, warp
    totals in order, tiles chain by their inclusive prefixes (what the decoupled look-back
    reads when the previous tile has finished). Which tuning a CUB release picks and the
    look-back's timing are not visible from here: the size of the error is what this
    reproduces, not its bits.

- **Atomic adds** (``scatter_add``, ``index_add``, ``put_(accumulate=True)``): each
  contribution is added into the low-precision destination by ``atomicAdd``, rounded each
  time, in an order the GPU picks; here in index order.
- **Atomic partial sums** (``nll_loss2d_forward`` with a ``mean`` or ``sum`` reduction,
  ATen/native/cuda/NLLLoss2d.cu): each block sums its pixels' losses and weights in fp32, then
  adds each sum, cast to the low dtype, into low-precision ``output`` and ``total_weight`` with
  ``gpuAtomicAdd``; the mean is their quotient in the low dtype. A fp16 batch whose weight
  total passes 65504 pixels makes ``total_weight`` inf: the mean is NaN (inf / inf), or 0.

The other reductions CUDA runs on fp16/bf16 keep every partial result in ``acc_type`` (fp32)
and round once (``emulation``): sum/mean/norm/var/prod/logsumexp and softmax (Reduce.cuh's
staging buffers are ``arg_t``), the norms' statistics, ``nll_loss`` on (N, C) (one block:
``total_weight`` and the mean rounded once, Loss.cu), its backward (the gradient divides by the
fp16 ``total_weight`` it was given, inf included), ``embedding_dense_backward`` (segment sums in
``acc_type``) and ``index_put_(accumulate=True)`` (sorted, summed in ``opmath_t``).
"""
from __future__ import annotations

import math

import torch


def _rounded(step, low):
    """``step(a, b)`` in fp32, rounded to ``low`` (fp32 tensors holding low values)."""
    return lambda a, b: step(a, b).to(low).float()


def _log_add_exp(a, b):
    """LogcumsumexpKernel.cu's step, in fp32; NaN in ``b`` propagates, infinities of one sign stay."""
    low, high = torch.minimum(a, b), torch.maximum(a, b)
    same_inf = (low == high) & torch.isinf(low)
    return torch.where(same_inf, a, torch.log1p(torch.exp(low - high)) + high)


#: the aten scans CUDA runs in the input's dtype, and their step in fp32
SCAN_STEPS = {"cumsum": torch.add, "cumprod": torch.mul, "logcumsumexp": _log_add_exp,
              "_logcumsumexp": _log_add_exp}


def cuda_scan(x: torch.Tensor, dim: int, step) -> torch.Tensor:
    """``x`` (fp16/bf16) scanned along ``dim`` as CUDA's ``scan_dim`` does (module doc)."""
    if x.dim() == 0 or x.numel() == 0:
        return x.clone()
    low, dim = x.dtype, dim % x.dim()
    op = _rounded(step, low)
    v = x.float().contiguous()
    shape = x.shape
    if x.numel() == shape[dim]:
        out = _device_scan(v.reshape(-1), op)
    elif dim == x.dim() - 1:
        out = _innermost_scan(v.reshape(-1, shape[-1]), op)
    else:
        out = _outer_scan(v.reshape(math.prod(shape[:dim]), shape[dim], -1), step, low)
    return out.reshape(shape).to(low)


def _outer_scan(v, step, low):
    """[outer, n, inner]: each column scanned one step after the other (in place: this
    loop is as long as the scanned dimension)."""
    out = v.transpose(0, 1).contiguous()
    rounded = torch.empty(out.shape[1:], dtype=low)
    for i in range(1, out.shape[0]):
        rounded.copy_(step(out[i - 1], out[i]))
        out[i].copy_(rounded)
    return out.transpose(0, 1)


def log_threads_x(num_rows: int, row_size: int) -> int:
    """get_log_num_threads_x_inner_scan<uint32_t>: the unsigned arithmetic included (many
    short rows wrap the difference around and give the maximum, 9)."""
    log_x, log_y = (row_size - 1).bit_length(), (num_rows - 1).bit_length()
    wrapped = ((9 + ((log_x - log_y) % 2**32)) % 2**32) // 2
    return min(max(4, wrapped), 9)


def _innermost_scan(v, op):
    """[rows, n]: tiles of 2 * num_threads_x, Sklansky within each, the running total
    carried into the next tile's first element."""
    rows, n = v.shape
    log_x = log_threads_x(rows, n)
    tile = 2 << log_x
    tiles = -(-n // tile)
    padded = torch.zeros(rows, tiles * tile)
    padded[:, :n] = v
    padded = padded.view(rows, tiles, tile)
    carry = None
    for k in range(tiles):
        buf = padded[:, k]
        if carry is not None:
            buf[:, 0] = op(buf[:, 0], carry)
        for m in range(log_x + 1):
            s = 1 << m
            halves = buf.view(rows, tile // (2 * s), 2, s)
            halves[:, :, 1] = op(halves[:, :, 1], halves[:, :, 0, s - 1:s])
        carry = buf[:, -1].clone()
    return padded.view(rows, -1)[:, :n]


CUB_THREADS, CUB_ITEMS, WARP = 128, 30, 32


def _device_scan(v, op):
    """One row: CUB's tiled device scan (module doc)."""
    n, per_tile = v.numel(), CUB_THREADS * CUB_ITEMS
    tiles = -(-n // per_tile)
    x = torch.zeros(tiles * per_tile)
    x[:n] = v
    x = x.view(tiles, CUB_THREADS, CUB_ITEMS)
    thread_total = x[:, :, 0]
    for i in range(1, CUB_ITEMS):
        thread_total = op(thread_total, x[:, :, i])
    # each thread's exclusive prefix within its tile (BlockScanWarpScans); lane 0 of warp 0 has none
    warps = thread_total.reshape(tiles, CUB_THREADS // WARP, WARP)
    for offset in (1, 2, 4, 8, 16):
        shifted = warps.clone()
        shifted[..., offset:] = op(warps[..., :-offset], warps[..., offset:])
        warps = shifted
    exclusive = torch.zeros_like(warps)
    exclusive[..., 1:] = warps[..., :-1]
    block_total = warps[:, 0, -1]
    for w in range(1, warps.shape[1]):
        exclusive[:, w, 1:] = op(block_total.unsqueeze(-1), exclusive[:, w, 1:])
        exclusive[:, w, 0] = block_total
        block_total = op(block_total, warps[:, w, -1])
    exclusive = exclusive.reshape(tiles, CUB_THREADS)
    # the tiles' prefixes, one after the other; then each thread's seed
    seed = exclusive.clone()
    if tiles > 1:
        prefixes = [block_total[0]]
        for k in range(1, tiles - 1):
            prefixes.append(op(prefixes[-1], block_total[k]))
        prefix = torch.stack(prefixes).unsqueeze(-1)
        seed[1:, 1:] = op(prefix, exclusive[1:, 1:])
        seed[1:, :1] = prefix
    running = op(seed, x[:, :, 0])
    running[0, 0] = x[0, 0, 0]  # the first thread of the first tile has no prefix
    out = torch.empty_like(x)
    out[:, :, 0] = running
    for i in range(1, CUB_ITEMS):
        running = out[:, :, i] = op(running, x[:, :, i])
    return out.reshape(-1)[:n]


#: the aten ops that add into their destination with atomicAdd on CUDA (put_ only when it
#: accumulates: ``emulation`` runs it exactly otherwise)
ATOMIC_ADDS = frozenset({"scatter_add", "scatter_add_", "index_add", "index_add_", "put_", "put"})


def atomic_add(name: str, self: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor,
               alpha=1) -> torch.Tensor:
    """A new tensor: ``self`` with ``src`` added at ``index`` along ``dim`` as CUDA's atomics
    add it (every add rounded to the low dtype), in index order."""
    if name.startswith("put"):  # put_(index, source, accumulate): flat indices, negative from the end
        return atomic_add("index_add", self.reshape(-1), 0, index.reshape(-1) % max(self.numel(), 1),
                          src.reshape(-1)).view(self.shape)
    low, dim = self.dtype, dim % max(self.dim(), 1)
    if name.startswith("index_add"):
        shape = [1] * src.dim()
        shape[dim] = -1
        index = index.view(shape).expand(src.shape)
        if alpha != 1:  # CUDA multiplies in the low dtype: src * alpha.to<scalar_t>()
            src = (src.float() * torch.tensor(alpha, dtype=low).float()).to(low)
    else:
        src = src[tuple(slice(0, size) for size in index.shape)]
    positions = torch.arange(self.numel()).view(self.shape)
    where = positions.gather(dim, index).reshape(-1) if self.dim() else positions.reshape(1).expand(index.numel())
    values = src.reshape(-1).float()
    order = torch.argsort(where, stable=True)
    where, values = where[order], values[order]
    first = torch.ones_like(where, dtype=torch.bool)
    first[1:] = where[1:] != where[:-1]
    start = torch.cummax(torch.where(first, torch.arange(where.numel()), 0), 0).values
    rank = torch.arange(where.numel()) - start
    out = self.float().reshape(-1).clone()
    for r in range(int(rank.max()) + 1 if rank.numel() else 0):
        at = rank == r
        out[where[at]] = (out[where[at]] + values[at]).to(low).float()
    return out.view(self.shape).to(low)


#: threads per block of NLLLoss2d.cu's kernels (CUDA_NUM_THREADS, ATen/cuda/detail/KernelUtils.h)
CUDA_NUM_THREADS = 1024
#: the aten ops whose blocks add fp32 partial sums into low-precision outputs (module doc)
ATOMIC_PARTIAL_SUMS = frozenset({"nll_loss2d_forward"})
MEAN, SUM = 1, 2  # at::Reduction


def nll_loss2d_reduced(x: torch.Tensor, target: torch.Tensor, weight, reduction: int, ignore_index: int):
    """(output, total_weight) of ``nll_loss2d_forward`` with a ``mean``/``sum`` reduction on a
    low-precision (N, C, H, W) ``x``, as NLLLoss2d.cu's ``nll_loss2d_forward_kernel`` and
    ``nll_loss2d_forward_size_average_kernel`` compute them: ``blocks_per_sample`` blocks per
    sample, block k summing the pixels whose 1024-wide chunk index is k modulo that count; each
    block's sums in fp32, added with ``gpuAtomicAdd`` into the low dtype in block order."""
    low = x.dtype
    n, _, h, w = x.shape
    if target.numel() == 0:  # the kernel is not launched: NaN for a mean, 0 for a sum
        return torch.tensor(math.nan if reduction == MEAN else 0.0, dtype=low), torch.zeros((), dtype=low)
    pixels = h * w
    blocks = max(1, -(-pixels // CUDA_NUM_THREADS) // 128)
    target = target.reshape(n, pixels)
    kept = target != ignore_index
    classes = torch.where(kept, target, 0)
    chosen = x.reshape(n, -1, pixels).gather(1, classes.unsqueeze(1)).squeeze(1).float()
    if weight is None:
        weights = kept.float()  # cur_weight = 1
        losses = chosen * weights
    else:  # input[i] * cur_weight: a low-precision product (c10::Half's operator*)
        weights = weight.float()[classes] * kept
        losses = (chosen * weights).to(low).float()
    block = (torch.arange(pixels) // CUDA_NUM_THREADS) % blocks
    loss_sums = torch.zeros(n, blocks).index_add_(1, block, -losses)
    weight_sums = torch.zeros(n, blocks).index_add_(1, block, weights)
    output = total = torch.zeros((), dtype=low)
    for loss_sum, weight_sum in zip(loss_sums.reshape(-1).to(low), weight_sums.reshape(-1).to(low)):
        output = (output.float() + loss_sum.float()).to(low)
        total = (total.float() + weight_sum.float()).to(low)
    if reduction == MEAN:
        output = (output.float() / total.float()).to(low)
    return output, total
