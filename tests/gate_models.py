"""Small model files for the CI-gate tests (pre-commit, config, suppressions, baseline, SARIF).

HAZARD masks fp16 attention scores with -1e9 under autocast (PA107, error: it becomes -inf);
CLEAN is its twin with torch.finfo(scores.dtype).min. The mask is in submodule ``attn`` so
that config patterns can name the module.
"""
import os
import textwrap

HAZARD = textwrap.dedent('''\
    import torch
    from torch import nn


    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(64, 64)

        def forward(self, x, mask):
            scores = self.q(x) @ x.transpose(-1, -2)
            scores = scores.masked_fill(mask, -1e9)
            return scores.softmax(-1)


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attention()

        def forward(self, x, mask):
            return self.attn(x, mask).float()


    def get_model():
        return Model()


    def get_example_inputs():
        return torch.randn(2, 16, 64), torch.zeros(2, 16, 16, dtype=torch.bool)
    ''')

CLEAN = HAZARD.replace("-1e9)", "torch.finfo(scores.dtype).min)")
HAZARD_LINE = HAZARD.splitlines().index("        scores = scores.masked_fill(mask, -1e9)") + 1

NOT_A_MODEL = "import os\n\n\ndef helper():\n    return os.sep\n"


def write(directory, name: str, source: str) -> str:
    """``source`` written to ``directory/name`` (its folders made); the path."""
    path = os.path.join(str(directory), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(source)
    return path


#: the same hazard inside a helper module: the op's line is not in the model file, so the
#: finding has no line (like ops inside transformers) and only config patterns can suppress it
HELPER = textwrap.dedent('''\
    def mask_scores(scores, mask):
        return scores.masked_fill(mask, -1e9)
    ''')


def helper_model(helper_module: str) -> str:
    return (HAZARD.replace("import torch\n", f"import torch\nfrom {helper_module} import mask_scores\n", 1)
            .replace("scores.masked_fill(mask, -1e9)", "mask_scores(scores, mask)"))
