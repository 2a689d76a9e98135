"""Shape rules judge what the model really does: a GEMM site with a negligible share of the
model's GEMM work is no PA201 finding (Swin-v2's cpb_mlp), and channel x channel attention
(XCiT's XCA) contracts tokens, not a head dim (PA206)."""
import pytest
from conftest import findings_of, sample, scanned_graph

TARGETS = [("float16", "autocast"), ("bfloat16", "autocast"), ("float16", "pure")]
CPB = "pa201_cpb_mlp_clean.py"
XCA = "pa206_xca_clean.py"


def rules_of(path, rule, dtype="float16", mode="autocast"):
    return [f for f in findings_of(path, dtype=dtype, mode=mode) if f.rule == rule]


def swinv2_block_macs():
    """The sample's multiply-adds, by hand: 4 windows of 64 tokens, dim 384, 12 heads of 32,
    a 225-row relative-coordinate table."""
    tokens, dim, heads, table = 4 * 64, 384, 12, 15 * 15
    attention = 2 * 4 * heads * 64 * 64 * (dim // heads)   # q @ k^T and probs @ v
    cpb_hidden, cpb_out = table * 2 * 512, table * 512 * heads
    rest = tokens * dim * 3 * dim + tokens * dim * dim + 2 * tokens * dim * 4 * dim
    return cpb_out, attention + cpb_hidden + cpb_out + rest


def test_the_cpb_mlp_site_share_is_its_multiply_adds_over_the_model_s():
    cpb_out, total = swinv2_block_macs()
    graph = scanned_graph(sample(CPB))
    work = {a["module"]: a["work"] for _, a in graph.nodes(data=True) if "work" in a and a["op"] == "linear"}
    assert work["attention.cpb_mlp.2"].macs == cpb_out
    assert work["attention.cpb_mlp.2"].site_share == pytest.approx(cpb_out / total)
    assert cpb_out / total < 0.01


@pytest.mark.parametrize("dtype,mode", TARGETS, ids="-".join)
def test_swinv2_cpb_mlp_with_12_outputs_is_no_padding_finding(dtype, mode):
    """0.3% of the block's work: padding its 12 outputs to 16 cannot buy a measurable speed-up."""
    assert rules_of(sample(CPB), "PA201", dtype, mode) == []


CPB_ALONE = """
import torch
from torch import nn


def get_model():
    return nn.Sequential(nn.Linear(2, 512), nn.ReLU(), nn.Linear(512, 12, bias=False))


def get_example_inputs():
    return (torch.randn(1, 15, 15, 2),)
"""


def test_the_same_projection_as_the_model_s_main_gemm_is_still_reported(tmp_path):
    """The other side: the same Linear(512, 12), now most of the model's work, is padded."""
    path = tmp_path / "cpb_alone.py"
    path.write_text(CPB_ALONE)
    (f,) = rules_of(str(path), "PA201")
    assert (f.module, f.evidence["dim"], f.evidence["size"]) == ("2", "N (out_features)", 12)


@pytest.mark.parametrize("dtype,mode", TARGETS, ids="-".join)
def test_xcit_cross_covariance_attention_is_no_head_dim_finding(dtype, mode):
    """q @ k^T contracts the 196 tokens (q is (head_dim, tokens)); the head dim, 48, is fine."""
    assert rules_of(sample(XCA), "PA206", dtype, mode) == []
    assert rules_of(sample(XCA), "PA201", dtype, mode) == []


XCA_FUSED = open(sample(XCA)).read().replace(
    """        attn = (q @ k.transpose(-2, -1)) * self.temperature  # (b, heads, head_dim, head_dim)
        attn = attn.softmax(dim=-1)
        x = attn @ v  # (b, heads, head_dim, n)
""", """        x = F.scaled_dot_product_attention(q * self.temperature, k, v, scale=1.0)
""")


def test_xcit_fused_path_through_sdpa_is_no_head_dim_finding(tmp_path):
    """timm's fused XCA hands SDPA q of (head_dim, tokens): SDPA's 'head dim' is the tokens."""
    assert "scaled_dot_product_attention" in XCA_FUSED
    path = tmp_path / "xca_fused.py"
    path.write_text(XCA_FUSED)
    assert rules_of(str(path), "PA206") == []


def test_token_attention_with_a_head_dim_of_20_is_still_reported():
    """The other side: ordinary attention contracts its head dim (20), not a token count."""
    (f,) = rules_of(sample("pa206_headdim_hazard.py"), "PA206")
    assert f.evidence["head_dim"] == 20


UNMASKED = """
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(288, 3 * 288)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 8, 36).permute(2, 0, 3, 1, 4)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        return (F.scaled_dot_product_attention(q, k, v).float(),
                F.scaled_dot_product_attention(q, k, v, attn_mask=causal).float())


def get_model():
    return Attention()


def get_example_inputs():
    return (torch.randn(2, 16, 288),)
"""


def test_head_dim_36_is_what_flash_attention_pads_and_the_memory_efficient_kernel_refuses(tmp_path):
    """Moonshine's head dim 36 (288 / 8). PyTorch pads q, k and v to a multiple of 8 for flash
    attention (attention.cpp, pad_last_dim<8>) and its flash filter takes any head dim up to
    256 (sdp_utils.cpp, check_head_dim_size_flash); the memory-efficient kernel wants a
    multiple of 8 in fp16 (check_head_dim_size_mem_efficient). Without a mask flash attention
    runs it padded to 40: an info that says so, not a warning that fused kernels refuse it.
    With the hand-made causal mask as attn_mask, flash attention cannot run it: a warning."""
    path = tmp_path / "head36.py"
    path.write_text(UNMASKED)
    found = sorted(rules_of(str(path), "PA206"), key=lambda f: f.node)
    assert [(f.severity, f.evidence["head_dim"]) for f in found] == [("info", 36), ("warning", 36)]
    assert "flash attention pads q, k and v to 40 (11% more work) to run it" in found[0].message
    assert "memory-efficient and cuDNN kernels do not take it" in found[0].message
    assert "masked, SDPA runs its unfused math path" in found[1].message


def test_a_padding_mask_keeps_every_fused_kernel_away_and_is_a_warning():
    """With a mask made from a model input (the batch's padding) flash attention cannot run the
    call and the memory-efficient kernel refuses dim 20: SDPA's math path, a warning."""
    (f,) = rules_of(sample("pa206_headdim_hazard.py"), "PA206")
    assert f.severity == "warning" and "SDPA runs its unfused math path" in f.message


MOONSHINE = """
import torch
import transformers as tf


def get_model():
    torch.manual_seed(0)
    config = tf.MoonshineConfig(hidden_size=288, intermediate_size=1152, encoder_num_hidden_layers=1,
                                decoder_num_hidden_layers=1, encoder_num_attention_heads=8,
                                decoder_num_attention_heads=8, vocab_size=1024, use_cache=False)
    return tf.MoonshineForConditionalGeneration(config).eval()


def get_example_inputs():
    return {"input_values": torch.randn(2, 1600), "decoder_input_ids": torch.randint(0, 1024, (2, 8))}
"""


def test_the_causal_mask_transformers_builds_only_while_tracing_is_no_mask(tmp_path):
    """Moonshine (head dim 36): its decoder's causal mask is built by masking_utils only because
    the capture's fake tensors look like tracing; a real run passes is_causal=True and no mask
    (checked on CPU: every SDPA call of this model gets attn_mask=None), so flash attention runs
    all three attentions padded: three infos, no warning."""
    pytest.importorskip("transformers")
    path = tmp_path / "moonshine.py"
    path.write_text(MOONSHINE)
    found = rules_of(str(path), "PA206")
    assert found and {(f.severity, f.evidence["head_dim"]) for f in found} == {("info", 36)}
