"""Shape rules: one finding per distinct site, one rule per GEMM, only what ran; at most 10
findings of one rule per model in a report."""
import json
import textwrap

from conftest import scanned_graph

from precisionaudit.core.numerics import Target
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

HEADER = """
import torch
import torch.nn.functional as F
from torch import nn
"""


def model_file(tmp_path, source, name="m.py"):
    path = tmp_path / name
    path.write_text(HEADER + textwrap.dedent(source))
    return str(path)


def findings(path, rule, mode="autocast"):
    results, found = scan([path], Target("float16", mode, "cuda"), load_rules())
    assert results[0].status == "ok", results[0].error
    return [f for f in found if f.rule == rule]


LOOP = """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(100, 100))

    def forward(self, x):
        h = F.pad(x, (0, 36))  # 100 wide, and no input dim
        for _ in range(50):
            h = h @ self.w
        return h.float()

def get_model():
    return M()

def get_example_inputs():
    return (torch.randn(4, 64),)
"""


def test_a_gemm_repeated_in_a_loop_is_one_finding_with_its_count(tmp_path):
    found = findings(model_file(tmp_path, LOOP), "PA201")
    assert len(found) == 1
    assert found[0].evidence["occurrences"] == 50 and "(50 occurrences)" in found[0].message


SMALL = """
def get_model():
    return nn.Sequential(nn.Linear(30, 30), nn.Linear(30, 30))

def get_example_inputs():
    return (torch.randn(4, 30),)
"""


def test_a_small_gemm_is_pa204_only_never_also_pa201(tmp_path):
    path = model_file(tmp_path, SMALL)
    assert findings(path, "PA201") == []
    small = findings(path, "PA204")
    assert len(small) == 1 and small[0].evidence["occurrences"] == 2  # two identical layers


VOCAB = """
class LM(nn.Module):
    def __init__(self, tie):
        super().__init__()
        self.wte = nn.Embedding(50257, 64)
        self.unused_head = nn.Linear(64, 50257)   # never called
        self.lm_head = nn.Linear(64, 50257 if tie else 50304, bias=False)
        if tie:
            self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        return self.lm_head(self.wte(ids)).float()

def get_model():
    return LM(tie=TIE)

def get_example_inputs():
    return (torch.randint(0, 50257, (2, 8)),)
"""


def test_a_tied_vocabulary_matrix_is_one_finding_on_its_gemm(tmp_path):
    found = findings(model_file(tmp_path, VOCAB.replace("TIE", "True")), "PA202")
    assert [(f.module, f.evidence["size"], f.evidence["padded"]) for f in found] == [
        ("lm_head", 50257, 50304)]
    assert found[0].evidence["tied_with"] == ["wte"]


def test_embedding_lookups_and_modules_that_never_ran_are_not_reported(tmp_path):
    """The untied wte is only looked up (a gather, no GEMM); unused_head never runs."""
    assert findings(model_file(tmp_path, VOCAB.replace("TIE", "False")), "PA202") == []


CONVS = """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(8, 36, 3, padding=1)
        self.depthwise = nn.Conv2d(36, 36, 3, padding=1, groups=36)
        self.grouped = nn.Conv2d(36, 36, 3, padding=1, groups=4)
        self.never = nn.Conv2d(36, 100, 1)

    def forward(self, x):
        return self.grouped(self.depthwise(self.stem(x))).float()

def get_model():
    return M()

def get_example_inputs():
    return (torch.randn(2, 8, 16, 16),)
"""


def test_depthwise_grouped_and_unused_convs_are_not_reported(tmp_path):
    assert [f.module for f in findings(model_file(tmp_path, CONVS), "PA203")] == ["stem"]


ATTENTION = """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HEADS * DIM, 3 * HEADS * DIM)

    def forward(self, x, bias):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, DIM).permute(2, 0, 3, 1, 4)
        if SDPA:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias).float()
        q, k, v = (z.reshape(b * HEADS, t, DIM) for z in (q, k, v))
        scores = torch.baddbmm(bias.reshape(b * HEADS, t, t), q, k.transpose(1, 2), alpha=DIM ** -0.5)
        return (scores.softmax(-1) @ v).float()

def get_model():
    return M()

def get_example_inputs():
    return (torch.randn(2, 100, HEADS * DIM), torch.randn(2, HEADS, 100, 100))
"""


def attention(tmp_path, dim, sdpa):
    source = ATTENTION.replace("HEADS", "4").replace("DIM", str(dim)).replace("SDPA", str(sdpa))
    return model_file(tmp_path, source, name=f"attn_{dim}_{sdpa}.py")


def test_head_dim_is_read_from_q_not_from_the_mask_or_bias(tmp_path):
    """The mask / ALiBi bias ends in the key length (100): the head dim is 64."""
    for sdpa in (True, False):
        assert findings(attention(tmp_path, 64, sdpa), "PA206") == [], sdpa
        found = findings(attention(tmp_path, 20, sdpa), "PA206")
        assert [f.evidence["head_dim"] for f in found] == [20], sdpa


NORM = """
class M(nn.Module):
    def forward(self, x):
        return x.norm(p=2, dim=-1).float()

def get_model():
    return M()

def get_example_inputs():
    return (torch.randn(2, 3, 5, 7),)
"""


def test_the_order_p_of_a_norm_is_not_read_as_a_dim(tmp_path):
    graph = scanned_graph(model_file(tmp_path, NORM), mode="pure")
    norm = next(a for _, a in graph.nodes(data=True) if a["op"] == "norm")
    assert norm["dims"] == [-1] and norm["reduction"].extent == 7


MANY = """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 65 + 2 * i) for i in range(15))

    def forward(self, x):
        return [layer(x).float() for layer in self.layers]

def get_model():
    return M()

def get_example_inputs():
    return (torch.randn(4, 64),)
"""


def test_a_report_shows_at_most_ten_findings_of_one_rule_per_model(tmp_path, cli):
    """15 distinct unaligned GEMMs: 10 reported, the last of them counts the 5 others."""
    path = model_file(tmp_path, MANY)
    assert len(findings(path, "PA201")) == 15  # the scan itself keeps them all (plans need them)
    report = json.loads(cli("scan", "--isolated", path, "--format", "json").stdout)
    shown = [f for f in report["findings"] if f["rule"] == "PA201"]
    assert len(shown) == 10
    assert [f["evidence"].get("more") for f in shown].count(5) == 1


TOKENS = """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(64, 3 * HEAD)

    def forward(self, x):
        h = F.pad(x, (0, 1))[..., :64]  # 4 tokens of width 64; 4 is no input dim
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        probs = (q @ k.transpose(-2, -1) / HEAD ** 0.5).softmax(-1)
        out = probs @ v
        score = out @ out.mean(1).unsqueeze(-1)  # a matrix-vector product: N = 1
        return score.float()

def get_model():
    return M()

def get_example_inputs():
    return (torch.randn(2, 4, 63),)
"""


def test_token_counts_and_matrix_vector_products_are_not_gemm_alignment_sites(tmp_path):
    """q @ k^T's N and probs @ v's K are the key count (4, from the input), also when the
    queries are subsampled; the last GEMM is a matrix-vector product. Only a head dim the
    model fixes is judged."""
    assert findings(model_file(tmp_path, TOKENS.replace("HEAD", "64")), "PA201") == []
    subsampled = TOKENS.replace("HEAD", "64").replace("probs = (q @", "probs = (q[:, :1] @")
    assert findings(model_file(tmp_path, subsampled, name="sub.py"), "PA201") == []  # LeViT
    found = findings(model_file(tmp_path, TOKENS.replace("HEAD", "12"), name="m12.py"), "PA201")
    assert {(f.evidence["dim"], f.evidence["size"]) for f in found} == {("K", 12), ("N", 12)}


IMAGE_CONVS = """
def get_model():
    return nn.Sequential(nn.Conv2d(3, 64, 3), nn.Conv2d(64, 100, 3), nn.Conv2d(100, 104, 3),
                         nn.Conv2d(104, 3, 3))

def get_example_inputs():
    return (torch.randn(1, 3, 16, 16),)
"""


def test_image_sized_conv_channels_are_info_other_counts_warnings(tmp_path):
    found = findings(model_file(tmp_path, IMAGE_CONVS), "PA203")
    assert sorted((f.module, f.evidence["channels"], f.severity) for f in found) == [
        ("0", "in_channels", "info"), ("1", "out_channels", "warning"), ("2", "in_channels", "warning"),
        ("3", "out_channels", "info")]
