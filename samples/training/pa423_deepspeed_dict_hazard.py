"""PA423 hazard: a DeepSpeed config built in the training script, fp16 with a static loss
scale of 1 (no loss scaling)."""
import deepspeed


def engine(args, model):
    ds_config = {
        "train_micro_batch_size_per_gpu": args.batch_size,
        "gradient_accumulation_steps": args.accum,
        "fp16": {"enabled": True, "loss_scale": 1},  # PA423
        "zero_optimization": {"stage": 2},
    }
    return deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
