"""The sampled statistics: measured on one step every ``every``, accumulated on the device and
read once (one host synchronisation per sample).

* per module: the largest |value| its forward returned (``forward_absmax``) and the share of
  its dtype's largest value that is (``headroom``: 1 is an overflow);
* per module, the largest |gradient| (``grad_absmax``, every element) and, in float16 runs,
  the share of its parameters' nonzero gradient elements that sit below float16's smallest
  normal once multiplied by the loss scale in use
  (``grad_underflow_share``: the elements the next halving of the scale, or a gradient a
  little smaller, flushes to 0; exact zeros are left out, they may be unused rows);
* per low-precision parameter: the share of its elements with a nonzero gradient whose
  stored value did not change at the step (``update_lost_share``: the update rounded away);
* per parameter with an ``exp_avg_sq`` state: the share of its elements with a nonzero
  gradient whose ``exp_avg_sq`` is 0 or subnormal in its dtype (``state_underflow_share``;
  with a nonzero gradient it cannot be 0 in exact arithmetic).

The shares read at most ``ELEMENTS`` evenly strided elements of each parameter (and of its
gradient and state), so that a sample holds no copy of the weights and reads each gradient
once (for its largest value): O(parameters) numbers, not O(weights).
"""
from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from ..core.numerics import dtype_name
from ..runtime.pytorch.dtypes import LOW_PRECISION as LOW

#: elements of each parameter (and its gradient and state) the shares read (evenly strided)
ELEMENTS = 4096
FP16_SMALLEST_NORMAL = 2.0 ** -14


def local(t):
    """A DTensor's local shard (FSDP2), a tensor as it is."""
    return t.to_local() if hasattr(t, "to_local") else t


def strided(t: torch.Tensor) -> torch.Tensor:
    """A view of at most ELEMENTS evenly spaced elements of ``t``."""
    flat = local(t).detach().reshape(-1)
    step = max(1, flat.numel() // ELEMENTS)
    return flat[::step][:ELEMENTS]


class ForwardMaxima:
    """Forward hooks that keep each module's largest |output| on the device."""

    def __init__(self, names: dict):
        self.names = names
        self.maxima: dict = {}  # name -> device tensor
        self.dtypes: dict = {}  # name -> the output dtype (host knowledge, no sync)
        self.paused = False  # set during a replay: its forward is no step of the run
        self.handles = [module.register_forward_hook(self._seen) for module in names]

    def _seen(self, module, args, output):
        if self.paused or not torch.is_grad_enabled():
            return
        name = self.names[module]
        for t in pytree.tree_leaves(output):
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
                largest = local(t).detach().abs().amax().float()
                previous = self.maxima.get(name)
                self.maxima[name] = largest if previous is None else torch.maximum(previous, largest)
                if self.dtypes.get(name) not in LOW:
                    self.dtypes[name] = t.dtype

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


class StepMeasures:
    """Gradient statistics before the optimizer step, update and state statistics after it,
    for one sampled step."""

    def __init__(self, params: dict, fp16_run: bool):
        self.params = params  # parameter -> (name, module)
        self.fp16_run = fp16_run
        self.grads: dict = {}  # module -> [absmax, nonzero, underflow] device tensors
        self.before: dict = {}  # parameter -> (strided values before, strided gradient != 0)
        self.after: dict = {}  # parameter name -> {key: device tensor}

    def gradients(self, scale) -> None:
        """Per module: the largest |gradient|, its nonzero elements, those below float16's
        smallest normal at ``scale`` (a tensor or a number)."""
        for p, (name, module) in self.params.items():
            if p.grad is None:
                continue
            g = local(p.grad).detach()
            if not g.is_floating_point() or not g.numel():
                continue
            low, high = torch.aminmax(g)  # one pass over the whole gradient, no copy
            sample = strided(g).abs()
            nonzero = sample != 0
            row = [torch.maximum(high, -low).float(), nonzero.sum().float()]
            if self.fp16_run:
                row.append((nonzero & (sample.float() * scale < FP16_SMALLEST_NORMAL)).sum().float())
            known = self.grads.get(module)
            self.grads[module] = row if known is None else [torch.maximum(known[0], row[0])] + [
                a + b for a, b in zip(known[1:], row[1:])]
            values = strided(p)
            self.before[p] = (values.clone() if p.dtype in LOW else None, strided(p.grad) != 0)

    def updates(self, optimizer) -> None:
        """After the step: lost updates of low-precision parameters, underflowed states."""
        for p, (values, moving) in self.before.items():
            name = self.params[p][0]
            row = {"moving": moving.sum().float()}
            if values is not None:
                row["lost"] = (moving & (strided(p) == values)).sum().float()
            state = optimizer.state.get(p, {})
            v = state.get("exp_avg_sq")
            if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() == p.numel():
                tiny = torch.finfo(v.dtype).tiny
                row["state_under"] = (moving & (strided(v).abs() < tiny)).sum().float()
                row["state_dtype"] = v.dtype
            self.after[name] = row

    def read(self) -> Counts:
        """The accumulators as numbers (one read of all of them): this rank's counts."""
        tensors = [t for row in self.grads.values() for t in row]
        tensors += [t for row in self.after.values() for t in row.values() if isinstance(t, torch.Tensor)]
        values = iter(_read(tensors))
        modules = {module: [next(values) for _ in row] for module, row in self.grads.items()}
        parameters = {}
        for name, row in self.after.items():
            parameters[name] = {k: next(values) for k, v in row.items() if isinstance(v, torch.Tensor)}
            if "state_dtype" in row:
                parameters[name]["state_dtype"] = dtype_name(row["state_dtype"])
        return Counts(modules, parameters, self.fp16_run)


class Counts:
    """A sample's counts, read: per module [largest |gradient|, nonzero elements, those below
    float16's smallest normal], per parameter the moving, lost and state-underflowed elements.
    Counts add up across ranks (``merged``): a sharded parameter's (FSDP2) shares are then the
    whole parameter's, not the last rank's shard's."""

    def __init__(self, modules: dict, parameters: dict, fp16_run: bool):
        self.modules, self.parameters, self.fp16_run = modules, parameters, fp16_run

    @staticmethod
    def merged(all_ranks: list) -> Counts:
        """The counts of every rank summed (the largest gradient: the largest)."""
        modules, parameters = {}, {}
        for counts in all_ranks:
            for module, row in counts.modules.items():
                known = modules.get(module)
                modules[module] = list(row) if known is None else [max(known[0], row[0])] + [
                    a + b for a, b in zip(known[1:], row[1:])]
            for name, row in counts.parameters.items():
                known = parameters.setdefault(name, {})
                for key, value in row.items():
                    known[key] = value if key == "state_dtype" else known.get(key, 0) + value
        return Counts(modules, parameters, all_ranks[0].fp16_run)

    def stats(self, dtype_of: dict) -> tuple[dict, dict]:
        """({module: stats}, {parameter: stats}): the shares of the counts."""
        modules = {}
        for module, got in self.modules.items():
            modules[module] = {"grad_absmax": got[0]}
            if self.fp16_run:
                modules[module]["grad_underflow_share"] = got[2] / got[1] if got[1] else 0.0
        parameters = {}
        for name, got in self.parameters.items():
            stats = {"dtype": dtype_of.get(name)}
            moving = got["moving"]
            if "lost" in got:
                stats["update_lost_share"] = got["lost"] / moving if moving else 0.0
            if "state_under" in got:
                stats["state_underflow_share"] = got["state_under"] / moving if moving else 0.0
                stats["state_dtype"] = got["state_dtype"]
            stats["moving_elements"] = int(moving)
            parameters[name] = stats
        return modules, parameters


def _read(tensors: list) -> list:
    """The values of scalar device tensors, one transfer per device."""
    if not tensors:
        return []
    by_device: dict = {}
    for i, t in enumerate(tensors):
        by_device.setdefault(t.device, []).append(i)
    out = [0.0] * len(tensors)
    for indices in by_device.values():
        for i, value in zip(indices, torch.stack([tensors[i].reshape(()) for i in indices]).tolist()):
            out[i] = value
    return out


def read_maxima(maxima: ForwardMaxima) -> dict:
    """{module: {forward_absmax, headroom, dtype}} from the hooks' accumulators."""
    names = list(maxima.maxima)
    values = _read([maxima.maxima[n] for n in names])
    out = {}
    for name, value in zip(names, values):
        dtype = maxima.dtypes.get(name)
        largest = torch.finfo(dtype).max if dtype is not None else None
        out[name] = {"forward_absmax": value, "dtype": dtype_name(dtype),
                     "headroom": value / largest if largest else None}
    return out
