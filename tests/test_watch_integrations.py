"""precisionaudit.watch inside frameworks' loops: the Hugging Face Trainer's callback on a tiny
GPT-2 (built from a config, no download) and a Lightning callback."""
import warnings

import pytest
import torch

from precisionaudit.frontend import WATCH
from precisionaudit.watch.log import read_log, summarize

transformers = pytest.importorskip("transformers")
BAD_TOKEN = 127


class Tokens(torch.utils.data.Dataset):
    """Random token ids; sample ``bad`` holds BAD_TOKEN, whose embedding row is inf."""

    def __init__(self, bad=None):
        self.bad = bad

    def __len__(self):
        return 64

    def __getitem__(self, i):
        ids = torch.randint(0, BAD_TOKEN, (16,), generator=torch.Generator().manual_seed(i))
        if i == self.bad:
            ids[3] = BAD_TOKEN
        return {"input_ids": ids, "labels": ids}


def train_gpt2(tmp_path, bad=None):
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from precisionaudit.integrations.transformers import PrecisionWatchCallback

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=16, n_embd=32, n_layer=1, n_head=4,
                                       tie_word_embeddings=False))
    if bad is not None:
        with torch.no_grad():
            model.transformer.wte.weight[BAD_TOKEN] = float("inf")  # a corrupted row of a checkpoint
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=8, per_device_train_batch_size=4, use_cpu=True,
        report_to=[], logging_steps=1, save_strategy="no", disable_tqdm=True, seed=0)
    log = tmp_path / "log"
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(bad),
                      callbacks=[PrecisionWatchCallback(log_dir=str(log), every=4)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    report = summarize(read_log(str(log)))
    mine = [str(w.message) for w in caught if "precisionaudit" in str(w.message)]
    return report, {f.rule: f for f in WATCH.findings(report, str(log))}, mine


def test_the_trainer_callback_watches_a_clean_gpt2_run(tmp_path):
    report, findings, warned = train_gpt2(tmp_path)
    assert report["steps"] == 8 and report["complete"] and findings == {} and warned == []
    assert report["integration"] == {"name": "transformers", "logging_nan_inf_filter": True}
    assert {"transformer.h.0.mlp.c_fc", "transformer.wte", "lm_head"} <= set(report["modules"])
    assert all(loss["nonfinite_count"] == 0 for loss in report["loss"].values())


def test_the_trainer_callback_says_when_the_logged_loss_hid_nonfinite_losses(tmp_path):
    report, findings, warned = train_gpt2(tmp_path, bad=19)
    first = report["first_nonfinite"]
    assert first["phase"] == "input" and first["input"] == "parameter transformer.wte.weight"
    assert (first["module"], first["op"]) == ("transformer.wte", "embedding")
    hidden = report["loss"]["0"]["nonfinite_count"]
    assert hidden >= 1 and findings["PA707"].evidence["count"] == hidden
    assert len(warned) == 1 and "logging_nan_inf_filter" in warned[0]


def test_the_lightning_callback_watches_a_fit(tmp_path):
    lightning = pytest.importorskip("lightning")

    from precisionaudit.integrations.lightning import PrecisionWatch

    class Module(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            return self(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-2)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(48, 16))
    trainer = lightning.Trainer(max_epochs=1, accelerator="cpu", precision="bf16-mixed", logger=False,
                                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                                callbacks=[PrecisionWatch(log_dir=str(tmp_path / "log"), every=2)])
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=8))
    report = summarize(read_log(str(tmp_path / "log")))
    assert report["steps"] == 6 and report["complete"] and report["run"]["dtype"] == "bfloat16"
    assert {"net.0", "net.2"} <= set(report["modules"])
    assert report["loss"]["0"]["logged"] == 6 and WATCH.findings(report, str(tmp_path / "log")) == []
