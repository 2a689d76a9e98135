"""``Watch``: the monitor that lives in the user's training loop.

Always on, every step, with no host synchronisation of its own where a loss scaler is used:
whether the optimizer stepped (its step pre-hook ran: GradScaler and DeepSpeed skip the
call on inf/NaN gradients), the loss (kept on the device until a sample reads it), and on a
skipped step, which has synchronised already, the scale and whether the loss was finite.
Without a scaler, a fused check of the gradients runs in the optimizer's step pre-hook (one
flag read per step, before the update is applied).

Sampled every ``every`` steps and on the step after a trigger: the statistics of
``sampling`` (forward maxima and headroom per module, gradient underflow at the scale in
use, lost updates, optimizer-state underflow), read once per sample. Under
``torch.distributed`` the ranks exchange one small all-gather per sample and per trigger.

A trigger (a non-finite loss or gradient, a streak of skipped steps, the scale under
``min_scale``) replays the step (``replay``) before the optimizer applies anything, logs
the first non-finite op, and leaves the run as it was.
"""
from __future__ import annotations

import math
import os

import torch
from torch.utils import _pytree as pytree

from ..core.numerics import dtype_name
from ..runtime.pytorch.autocast_state import autocast_state
from ..runtime.pytorch.dtypes import LOW_PRECISION as LOW
from . import wrappers
from .log import FORMAT, FORMAT_VERSION, SUMMARY, EventLog, read_log, summarize
from .replay import replay, rng_state
from .sampling import Counts, ForwardMaxima, StepMeasures, local, read_maxima

#: consecutive skipped steps that trigger a replay (GradScaler's start-up calibration skips
#: a few steps while it halves a scale too large for the gradients)
SKIP_STREAK = 10
#: a loss scale below this triggers a replay: the scale is collapsing
MIN_SCALE = 1.0


class Watch:
    """The monitor of one training run (one rank): ``step(loss)`` once per optimizer step,
    ``close()`` at the end (or use it as a context manager)."""

    def __init__(self, model, optimizer, scaler=None, log_dir: str = "precisionaudit-watch", every: int = 100,
                 skip_streak: int = SKIP_STREAK, min_scale: float = MIN_SCALE, replays: int = 1,
                 check_gradients: bool | None = None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"precisionaudit.watch: model must be a torch.nn.Module (plain, or wrapped in DDP, "
                            f"FSDP or a DeepSpeed engine), not {type(model).__name__}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"precisionaudit.watch: every must be a positive integer, not {every!r}")
        self.model = model
        self.runnable = wrappers.runnable_model(model)
        self.names = wrappers.module_names(self.runnable)
        self.params = {p: named for p, named in wrappers.parameter_names(self.runnable).items() if p.requires_grad}
        engine = model if wrappers.is_deepspeed_engine(model) else None
        if optimizer is None and engine is not None:
            optimizer = engine.optimizer
        self.optimizer = wrappers.torch_optimizer(optimizer)
        self.scaler = wrappers.found_scaler(scaler, optimizer, model)
        if self.scaler is None and engine is not None and wrappers.DeepSpeedScale(engine).is_enabled():
            self.scaler = wrappers.DeepSpeedScale(engine)
        self.scaling = wrappers.enabled(self.scaler)
        self.check_gradients = (not self.scaling) if check_gradients is None else check_gradients
        self.every, self.skip_streak, self.min_scale, self.replays_left = every, skip_streak, min_scale, replays
        self.rank, self.world_size = _distributed()
        self.compute_dtype = wrappers.compute_dtype(model)  # an engine's own (FSDP MixedPrecision, DeepSpeed)
        self.log_dir = log_dir
        self.log = EventLog(log_dir, self.rank)
        self.steps = 0
        self.closed = False
        # the forwards since the last optimizer step (the micro-batches of gradient
        # accumulation): each one's batch, random state and autocast state, by reference, and
        # the gradients that reach its outputs
        self._micro: list[_Forward] = []
        self._autocast: list = []  # the last forward's autocast state: the dtype the run computes in
        self._replaying = False
        self._stepped = False
        self._stepped_since_forward = False  # set by step(): the next forward starts the next step's list
        self._triggered_at = None  # the step whose trigger was handled (pre-hook or skip)
        self._streak = 0
        self._losses: list = []
        self._losses_from = 0
        self._sample_next = False
        self._maxima = self._measures = None
        self._skip_modules_left = 20
        self._reasons: set = set()  # the triggers met so far (each replays and is logged once)
        self.last_loss = None
        self._handles = [
            model.register_forward_pre_hook(self._before_forward, with_kwargs=True),
            model.register_forward_hook(self._after_forward),
            self.optimizer.register_step_pre_hook(self._before_step),
            self.optimizer.register_step_post_hook(self._after_step),
        ]
        self.log.write("start", format=FORMAT, version=FORMAT_VERSION, rank=self.rank, world_size=self.world_size,
                       every=every, pid=os.getpid(), model=type(self.runnable).__name__,
                       wrapper=type(model).__name__ if model is not self.runnable else None,
                       optimizer=type(self.optimizer).__name__, device=self._device(),
                       dtype=None, mode="pure" if self.compute_dtype in LOW else _mode(self.params),
                       storage_dtype=_storage_dtype(self.params), scaler=self._scaler_info(),
                       module_types={name: type(m).__name__ for m, name in self.names.items()},
                       parameters={name: {"module": module, "dtype": dtype_name(p.dtype), "numel": p.numel()}
                                   for p, (name, module) in self.params.items()})
        self._arm(0)

    # ------------------------------------------------------------------ context manager
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ------------------------------------------------------------------ hooks
    def _before_forward(self, module, args, kwargs):
        if self._replaying or not torch.is_grad_enabled():
            return
        if self._stepped_since_forward:
            self._micro, self._stepped_since_forward = [], False
        self._autocast = autocast_state()
        self._micro.append(_Forward((args, kwargs), rng_state(), self._autocast))

    def _after_forward(self, module, args, output):
        if self._replaying or not torch.is_grad_enabled() or not self._micro:
            return
        leaves = pytree.tree_leaves(output)
        grads = [None] * len(leaves)
        differentiable = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor) and t.requires_grad]
        # a model that returns its loss (HF's outputs.loss): the loss's gradient drives the
        # whole backward; keeping the logits' too would hold a tensor of the logits' size
        scalars = [i for i in differentiable if leaves[i].dim() == 0]
        for i in scalars or differentiable:
            leaves[i].register_hook(_Keep(grads, i))
        loss = getattr(output, "loss", None)
        self.last_loss = loss.detach() if isinstance(loss, torch.Tensor) else None
        forward = self._micro[-1]
        forward.output_grads = grads
        # the micro-batch's loss, where the model returns it (a scalar, HF's outputs.loss): kept
        # on the device, read only when the step is skipped
        forward.loss = self.last_loss if self.last_loss is not None else (
            leaves[scalars[0]].detach() if len(scalars) == 1 else None)

    def _before_step(self, optimizer, args, kwargs):
        if self._replaying:
            return
        self._stepped = True
        if self._measures is not None:
            self._measures.gradients(self._scale_tensor())
        if self.check_gradients and self._gradients_nonfinite() and "nonfinite-gradient" not in self._reasons:
            self._trigger(self.steps, "nonfinite-gradient")

    def _after_step(self, optimizer, args, kwargs):
        if self._measures is not None and not self._replaying:
            self._measures.updates(self.optimizer)

    # ------------------------------------------------------------------ the step
    def step(self, loss=None) -> None:
        """Once per optimizer step, after it (``loss``: the step's loss, a tensor or a number;
        None: the ``loss`` attribute of the model's last output, as Hugging Face models
        return it)."""
        if self.closed:
            raise RuntimeError("precisionaudit.watch: step() after close()")
        step = self.steps
        if loss is None:
            loss = getattr(self, "last_loss", None)
        self._losses.append(loss.detach() if isinstance(loss, torch.Tensor) else loss)
        if self.scaling and self._skipped():
            self._on_skip(step, loss)
        else:
            self._streak = 0
        if self._maxima is not None or self._measures is not None:
            self._sample(step)
        self.steps += 1
        self._stepped = False
        self._stepped_since_forward = True
        self._arm(self.steps)

    def _skipped(self) -> bool:
        told = getattr(self.scaler, "overflowed", None)
        if callable(told) and told() is not None:
            return told()
        return not self._stepped

    def _on_skip(self, step: int, loss) -> None:
        """A step the scaler skipped (it has synchronised already: reading the scale and the
        loss costs nothing more)."""
        self._streak += 1
        scale = float(self.scaler.get_scale())
        loss_finite = _finite(loss.detach() if isinstance(loss, torch.Tensor) else loss)
        modules = []
        if self._skip_modules_left > 0:
            self._skip_modules_left -= 1
            modules = self._nonfinite_gradient_modules()
        micro_finite = self._micro_losses_finite()
        self.log.write("skip", step=step, scale=scale, loss_finite=loss_finite, streak=self._streak,
                       nonfinite_modules=modules, micro_losses_finite=micro_finite)
        reasons = [why for why, met in (("nonfinite-loss", loss_finite is False or micro_finite is False),
                                        ("skip-streak", self._streak >= self.skip_streak),
                                        ("scale-collapse", scale < self.min_scale)) if met and why not in self._reasons]
        why = self._agreed(reasons[0] if reasons else None)
        if why is not None and why not in self._reasons and self._triggered_at != step:
            self._trigger(step, why)

    def _trigger(self, step: int, why: str) -> None:
        """Replay the step (once per run by default), gather every rank's answer, log it."""
        self._triggered_at = step
        self._reasons.add(why)
        self._sample_next = True
        result = None
        if self.replays_left > 0 and self._micro:
            self.replays_left -= 1
            self._replaying = True
            if self._maxima is not None:  # the replay's forward is no step of the run: not sampled
                self._maxima.paused = True
            try:
                result = self._replay_micro_batches()
            except Exception as exc:  # noqa: BLE001 - the user's run goes on whatever the replay met
                result = {"first": None, "error": f"{type(exc).__name__}: {exc}"}
            finally:
                self._replaying = False
                if self._maxima is not None:
                    self._maxima.paused = False
        replays = self._gather({"rank": self.rank, **result}) if result is not None else None
        losses = self._flush_losses()
        self.log.write("trigger", step=step, why=why, scale=self._scale_or_none(), dtype=self._run_dtype(),
                       replays=replays, losses=losses, ranks=self._gather(self._rank_view(losses["values"])))

    def _micro_losses_finite(self):
        """Whether every micro-batch's loss the model returned was finite (one read of them
        all, on a skipped step only: it has synchronised already); None when none returned it."""
        losses = [f.loss.float().reshape(()) for f in self._micro if f.loss is not None and f.loss.numel() == 1]
        return bool(torch.isfinite(torch.stack(losses)).all()) if losses else None

    def _replay_micro_batches(self) -> dict:
        """The step's micro-batches replayed in order, up to the first whose replay finds a
        non-finite op (with gradient accumulation an earlier one may have made the gradients
        inf/NaN). Ranks replaying together replay every micro-batch, so that their collectives
        stay in step; the first failing one is reported."""
        collective = self.world_size > 1
        found = None
        for index, forward in enumerate(self._micro):
            result = replay(self.runnable, self.names, forward.batch, forward.rng, forward.autocast,
                            forward.output_grads, collective=collective)
            result.update(micro_batch=index, micro_batches=len(self._micro))
            if found is None or (found["first"] is None and result["first"] is not None):
                found = result
            if found["first"] is not None and not collective:
                break
        return found

    # ------------------------------------------------------------------ samples
    def _arm(self, step: int) -> None:
        if step % self.every == 0 or self._sample_next:
            self._sample_next = False
            self._maxima = ForwardMaxima(self.names)
            self._measures = StepMeasures(self.params, self._fp16_run())

    def _sample(self, step: int) -> None:
        maxima, measures = self._maxima, self._measures
        self._maxima = self._measures = None
        maxima.remove()
        if not measures.grads:  # the pre-hook did not run (a skipped step): the gradients now
            measures.gradients(self._scale_tensor())
        modules = read_maxima(maxima)
        counts = measures.read()
        losses = self._flush_losses()
        views = self._gather({"view": self._rank_view(losses["values"], modules), "counts": counts})
        if self.world_size > 1:  # every rank's shard of each parameter (FSDP2), one exchange
            counts = Counts.merged([v["counts"] for v in views])
        grads, parameters = counts.stats({name: dtype_name(p.dtype) for p, (name, _) in self.params.items()})
        for name, stats in grads.items():
            modules.setdefault(name, {}).update(stats)
        self.log.write("sample", step=step, scale=self._scale_or_none(), dtype=self._run_dtype(),
                       losses=losses, modules=modules, parameters=parameters, ranks=[v["view"] for v in views])

    def _rank_view(self, losses: list, modules: dict | None = None) -> dict:
        """What this rank tells the others: its losses since the last exchange and, at a
        sample, its largest headroom."""
        losses = [v for v in losses if v is not None]
        view = {"rank": self.rank, "loss": losses[-1] if losses else None,
                "nonfinite_losses": sum(1 for v in losses if not math.isfinite(v))}
        if modules:
            worst = max(((s.get("headroom") or 0.0, n) for n, s in modules.items()), default=(0.0, None))
            view.update(headroom=worst[0], headroom_module=worst[1])
        return view

    def _flush_losses(self) -> dict:
        """The losses since the last flush, read at once (one transfer)."""
        tensors = [x.float().reshape(-1)[0] for x in self._losses if isinstance(x, torch.Tensor) and x.numel()]
        read = iter(torch.stack(tensors).tolist() if tensors else [])
        values = [next(read) if isinstance(x, torch.Tensor) and x.numel() else _number(x) for x in self._losses]
        flushed = {"first_step": self._losses_from, "values": values}
        self._losses_from += len(values)
        self._losses = []
        return flushed

    def note_integration(self, name: str, **facts) -> None:
        """Log what a framework integration knows of the run (the HF Trainer's
        ``logging_nan_inf_filter``): the log's reader takes its findings from it (PA707)."""
        self.log.write("integration", name=name, **facts)

    # ------------------------------------------------------------------ end
    def close(self) -> None:
        """Remove the hooks, log the last losses and the final scale, and (rank 0) write the
        summary of every rank's log."""
        if self.closed:
            return
        self.closed = True
        for handle in self._handles:
            handle.remove()
        if self._maxima is not None:
            self._maxima.remove()
        self.log.write("close", steps=self.steps, final_scale=self._scale_or_none(), losses=self._flush_losses())
        self.log.close()
        self._barrier()
        if self.rank == 0:
            import json

            from ..core.atomic import write_text_atomic

            write_text_atomic(os.path.join(self.log_dir, SUMMARY),
                              json.dumps(summarize(read_log(self.log_dir)), indent=1), "watch summary")
        self._micro = []

    # ------------------------------------------------------------------ helpers
    def _scale_tensor(self):
        scale = getattr(self.scaler, "_scale", None) if self.scaling else None
        if isinstance(scale, torch.Tensor):
            return scale
        return float(self.scaler.get_scale()) if self.scaling else 1.0

    def _scale_or_none(self):
        return float(self.scaler.get_scale()) if self.scaling else None

    def _scaler_info(self):
        if not self.scaling:
            return None
        init = getattr(self.scaler, "_init_scale", None)
        return {"kind": type(self.scaler).__name__, "init_scale": init if init is not None else self._scale_or_none()}

    def _device(self) -> str:
        p = next(iter(self.params), None)
        return p.device.type if p is not None else "cpu"

    def _run_dtype(self):
        """The low dtype the run computes in: autocast's, else the engine's (FSDP's
        param_dtype, DeepSpeed's), else the parameters'."""
        for _, dtype in self._autocast:
            return dtype_name(dtype)
        if self.compute_dtype is not None:
            return dtype_name(self.compute_dtype)
        low = [p.dtype for p in self.params if p.dtype in LOW]
        return dtype_name(max(set(low), key=low.count)) if low else "float32"

    def _fp16_run(self) -> bool:
        return self._run_dtype() == "float16"

    def _gradients_nonfinite(self) -> bool:
        """One fused check of every gradient, read once; agreed across ranks (FSDP shards
        differ). The L2 norms (float32 accumulation) are the fast kernel (on CPU some 20
        times faster than the max-norm); an inf/NaN norm is confirmed element-wise, so that a
        sum of squares past float32's range is not taken for an inf gradient."""
        by_device: dict = {}
        for p in self.params:
            grad = local(p.grad) if p.grad is not None else None
            if grad is not None and grad.numel():  # an FSDP shard may be empty
                by_device.setdefault((grad.device, grad.dtype), []).append(grad)
        flags = [torch.stack(torch._foreach_norm(grads, 2, dtype=torch.float32)).isfinite().all()
                 for grads in by_device.values()]
        bad = bool(flags) and not bool(torch.stack([f.cpu() for f in flags]).all())
        if bad:
            bad = not all(bool(torch.isfinite(g).all()) for grads in by_device.values() for g in grads)
        return self._any_rank(bad)

    def _nonfinite_gradient_modules(self) -> list:
        """The modules with an inf/NaN gradient, when the gradients are still there."""
        found = []
        for p, (_, module) in self.params.items():
            if p.grad is not None and not bool(torch.isfinite(local(p.grad)).all()) and module not in found:
                found.append(module)
        return found

    def _agreed(self, why):
        """The first rank's reason, when any rank has one: every rank triggers together."""
        if self.world_size == 1:
            return why
        reasons = self._gather(why)
        return next((r for r in reasons if r is not None), None)

    def _any_rank(self, flag: bool) -> bool:
        """``flag`` of any rank: one all-reduce of one number."""
        if self.world_size == 1:
            return flag
        import torch.distributed as dist

        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        t = torch.tensor([int(flag)], device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def _gather(self, obj) -> list:
        if self.world_size == 1:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def _barrier(self) -> None:
        if self.world_size > 1:
            import torch.distributed as dist

            dist.barrier()


class _Forward:
    """One forward of the step, kept by reference for a replay: its (args, kwargs), the random
    state it started from, its autocast state, and the gradients that reach its outputs."""

    def __init__(self, batch, rng, autocast):
        self.batch, self.rng, self.autocast = batch, rng, autocast
        self.output_grads = self.loss = None


class _Keep:
    """A tensor hook that keeps the gradient reaching one of the model's outputs."""

    def __init__(self, grads: list, index: int):
        self.grads, self.index = grads, index

    def __call__(self, grad):
        self.grads[self.index] = grad


def _distributed() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _storage_dtype(params: dict) -> str | None:
    """The dtype most parameters are stored in (an FSDP shard's, a DeepSpeed module's)."""
    dtypes = [p.dtype for p in params]
    return dtype_name(max(set(dtypes), key=dtypes.count)) if dtypes else None


def _mode(params: dict) -> str:
    """'pure' when the parameters themselves are fp16/bf16, else 'autocast'."""
    return "pure" if any(p.dtype in LOW for p in params) else "autocast"


def _number(x):
    if isinstance(x, torch.Tensor):
        return float(x.float().reshape(-1)[0]) if x.numel() else None
    return float(x) if isinstance(x, (int, float)) else None


def _finite(loss):
    value = _number(loss)
    return None if value is None else math.isfinite(value)
