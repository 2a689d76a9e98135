"""PA423 clean twin: the DeepSpeed config built in the script uses dynamic loss scaling
(loss_scale 0), and enables fp16 or bf16 by a flag (unknown here, and never both)."""
import deepspeed


def engine(args, model):
    ds_config = {
        "train_micro_batch_size_per_gpu": args.batch_size,
        "gradient_accumulation_steps": args.accum,
        "fp16": {"enabled": args.precision == "fp16", "loss_scale": 0, "initial_scale_power": 16},
        "bf16": {"enabled": args.precision == "bf16"},
        "zero_optimization": {"stage": 2},
    }
    return deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
