"""Real architectures we did not write: tiny Hugging Face GPT-2, BERT, Llama and T5.

Built from their configs with random weights (no hub access) and their real vocabularies
(cheap under fake tensors). They must scan without error, with the dtypes CUDA autocast
really gives their ops, without false positives on their idiomatic precision handling
(explicit fp32 upcasts, finfo(dtype).min masks, SDPA, autocast-disabled regions), and with
the findings that are real (unaligned vocabularies, logits scaled after the matmul).
"""
import functools
import json
import os

import pytest

pytest.importorskip("transformers")

from precisionaudit.core.numerics import Target  # noqa: E402
from precisionaudit.rules.engine import load_rules  # noqa: E402
from precisionaudit.scanner import scan  # noqa: E402

HF_MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_models")
FP16 = ("float16", "autocast")
TARGETS = [FP16, ("bfloat16", "autocast"), ("float16", "pure"), ("bfloat16", "pure")]
GEMMS = {"linear", "addmm", "matmul", "bmm", "baddbmm"}

#: attention layers: GPT-2, BERT, Llama 2 each; T5 2 encoder self + 2 decoder self + 2 cross
ATTENTIONS = {"gpt2": 2, "bert": 2, "llama": 2, "t5": 6}
#: model → number of weight GEMM modules (Linear, GPT-2's Conv1D) its forward runs
MODELS = {
    "gpt2": 2 * 4 + 1,  # c_attn, c_proj, c_fc, c_proj (Conv1D → addmm) per block + lm_head
    "bert": 2 * 6 + 2,  # q, k, v, attn out, intermediate, output per layer + transform, decoder
    "llama": 2 * 7 + 1,  # q, k, v, o, gate, up, down per layer + lm_head
    "t5": 2 * 6 + 2 * 10 + 1,  # enc: q,k,v,o,wi,wo; dec: + cross q,k,v,o; + lm_head
}


def model_path(name: str) -> str:
    return os.path.join(HF_MODELS, f"{name}_tiny.py")


@functools.lru_cache(maxsize=None)
def scanned(name: str, entry: str = "get_model", target=FP16):
    """(ModelResult, findings) of one scan, shared by the tests that read it."""
    results, findings = scan([model_path(name)], Target(target[0], target[1], "cuda"),
                             load_rules(), entry=entry)
    return results[0], findings


def graph_of(name, entry="get_model", target=FP16):
    result, _ = scanned(name, entry, target)
    assert result.status == "ok", result.error
    return result.graph


def ids(name, entry="get_model", target=FP16) -> set:
    return {f.rule for f in scanned(name, entry, target)[1]}


def nodes(graph, ops=None, module=None):
    return [a for _, a in graph.nodes(data=True)
            if (ops is None or a["op"] in ops) and (module is None or module(a["module"]))]


def computes(graph, ops, module=None) -> set:
    found = nodes(graph, ops, module)
    assert found, f"no {ops} node in {module}"
    return {a["compute_dtype"] for a in found}


# --------------------------------------------------------------------------- capture
@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("target", TARGETS, ids="-".join)
def test_scans_on_fake_tensors_under_every_target(name, target):
    result, _ = scanned(name, target=target)
    assert result.status == "ok", result.error
    assert result.error is None
    assert result.frontend == "fake", result.notes  # no eager fallback: no weights allocated
    gemm_modules = {a["module"] for a in nodes(result.graph, GEMMS) if a["params"]}
    assert len(gemm_modules) == MODELS[name]
    assert MODELS[name] < result.nodes < 25 * MODELS[name]


EAGER = [("gpt2", "get_eager_model"), ("gpt2", "get_upcast_model"), ("bert", "get_eager_model"),
         ("llama", "get_eager_model"), ("t5", "get_eager_model")]


@pytest.mark.parametrize("name,entry", EAGER)
def test_eager_attention_variants_scan(name, entry):
    result, _ = scanned(name, entry)
    assert (result.status, result.frontend) == ("ok", "fake"), result.error or result.notes
    assert len(nodes(result.graph, {"softmax"})) == ATTENTIONS[name]  # one per attention
    assert not nodes(result.graph, {"scaled_dot_product_attention"})


# --------------------------------------------------------------------------- dtypes under fp16 autocast
@pytest.mark.parametrize("name,mlp", [
    ("gpt2", lambda m: ".mlp.c_" in m), ("bert", lambda m: m.endswith(("intermediate.dense", "output.dense"))
                                         and "attention" not in m),
    ("llama", lambda m: ".mlp." in m), ("t5", lambda m: ".DenseReluDense." in m)])
def test_mlp_gemms_compute_in_float16(name, mlp):
    graph = graph_of(name)
    assert len(nodes(graph, GEMMS, mlp)) >= 4
    assert computes(graph, GEMMS, mlp) == {"float16"}
    # every GEMM that reads a weight is on autocast's lower-precision list
    assert {a["compute_dtype"] for a in nodes(graph, GEMMS) if a["params"]} == {"float16"}


@pytest.mark.parametrize("name,entry", EAGER)
def test_attention_softmax_computes_in_float32(name, entry):
    graph = graph_of(name, entry)
    assert computes(graph, {"softmax"}) == {"float32"}
    # ... while the q.k logits GEMM feeding it runs in fp16 (GPT-2's reordered upcast: fp32)
    logits = [graph.nodes[a["attention"].logits_from] for a in nodes(graph, {"softmax"}) if "attention" in a]
    assert len(logits) == ATTENTIONS[name]
    expected = "float32" if entry == "get_upcast_model" else "float16"
    assert {a["compute_dtype"] for a in logits} == {expected}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sdpa_is_one_fused_float16_op(name):
    graph = graph_of(name)
    sdpa = nodes(graph, {"scaled_dot_product_attention"})
    assert len(sdpa) == ATTENTIONS[name]
    assert {a["compute_dtype"] for a in sdpa} == {"float16"}
    assert not nodes(graph, {"softmax"})  # judged as the fused kernel, not its CPU decomposition


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_layer_norms_compute_in_float32(name):
    graph = graph_of(name)
    assert len(nodes(graph, {"layer_norm"})) >= 5
    assert computes(graph, {"layer_norm"}) == {"float32"}


def test_llama_rmsnorm_keeps_its_variance_in_float32():
    graph = graph_of("llama")
    norm = lambda m: m.endswith("layernorm") or m == "model.norm"  # noqa: E731
    assert computes(graph, {"pow", "mean", "rsqrt"}, norm) == {"float32"}
    for target in TARGETS:  # the explicit upcast holds in pure fp16/bf16 models too
        assert "PA102" not in ids("llama", target=target), target


def test_llama_rotary_embedding_computes_in_float32():
    graph = graph_of("llama")
    rope = nodes(graph, None, lambda m: m == "model.rotary_emb")
    assert {a["op"] for a in rope} >= {"cos", "sin"}
    assert {a["compute_dtype"] for a in rope} == {"float32"}
    # positions enter as int64 and are upcast to fp32 explicitly: exact up to 2**24
    assert "PA110" not in ids("llama")


def test_gpt2_autocast_disabled_region_computes_in_float32():
    """reorder_and_upcast_attn: baddbmm on q.float(), k.float() under autocast(enabled=False)."""
    graph = graph_of("gpt2", "get_upcast_model")
    assert computes(graph, {"baddbmm"}) == {"float32"}
    assert computes(graph, {"softmax"}) == {"float32"}
    # the value matmul after it is back under autocast
    assert computes(graph, {"matmul"}, lambda m: m.endswith(".attn")) == {"float16"}


def test_mixed_dtype_elementwise_op_computes_in_the_promoted_dtype():
    """Llama eager: fp16 logits + fp32 additive mask is computed (and returned) in fp32."""
    graph = graph_of("llama", "get_eager_model")
    softmax = nodes(graph, {"softmax"})[0]
    preds = [graph.nodes[p] for p in graph.predecessors(next(
        n for n, a in graph.nodes(data=True) if a is softmax))]
    add = next(a for a in preds if a["op"] == "add")
    assert sorted(add["in_dtypes"]) == ["float16", "float32"]
    assert add["compute_dtype"] == add["out_dtype"] == "float32"


# --------------------------------------------------------------------------- findings
CLEAN_UNDER_ANY_TARGET = {"PA103", "PA104", "PA107", "PA108", "PA109", "PA110", "PA113"}
CLEAN_UNDER_AUTOCAST = CLEAN_UNDER_ANY_TARGET | {"PA101", "PA102", "PA105", "PA201", "PA206"}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("target", TARGETS, ids="-".join)
def test_no_false_positives_on_idiomatic_hf_code(name, target):
    """finfo(dtype).min masks, explicit upcasts, SDPA, autocast's own lists: nothing to report."""
    clean = CLEAN_UNDER_AUTOCAST if target[1] == "autocast" else CLEAN_UNDER_ANY_TARGET
    assert not ids(name, target=target) & clean


@pytest.mark.parametrize("name,entry", EAGER)
@pytest.mark.parametrize("target", TARGETS, ids="-".join)
def test_no_false_positives_on_eager_attention(name, entry, target):
    """Additive masks filled with finfo(dtype).min, softmax upcasts: no constant/softmax finding."""
    found = ids(name, entry, target)
    assert "PA107" not in found
    if target[1] == "autocast":
        assert not found & CLEAN_UNDER_AUTOCAST


def test_logits_scaled_after_the_matmul_are_reported_and_the_reordered_upcast_is_not():
    for name in ("gpt2", "bert", "llama"):  # matmul(q, k.T) * scaling in fp16
        found = [f for f in scanned(name, "get_eager_model")[1] if f.rule == "PA106"]
        assert len(found) == 2, name
        assert {f.op for f in found} == {"matmul"}
    assert "PA106" not in ids("gpt2", "get_upcast_model")  # fp32 baddbmm with alpha=scale
    # T5 does not scale its logits: its eager path multiplies them by scaling = 1.0
    assert "PA106" not in ids("t5", "get_eager_model")


def test_prescale_is_judged_against_the_head_dim_in_real_attention():
    """Falcon's ALiBi path stores q @ k^T in fp16, upcasts it after, then scales it in place
    (`*=`): reported. OPT scales q by head_dim**-0.5 before the matmul: silent."""
    found = [f for f in scanned("falcon")[1] if f.rule == "PA106"]
    assert len(found) == 2 and {f.evidence["scale_after"] for f in found} == {0.25}
    assert {f.evidence["source"].rsplit("/", 1)[-1].split(":")[0] for f in found} == {"modeling_falcon.py"}
    logits = [a["attention"] for a in nodes(graph_of("opt")) if "attention" in a and a["attention"].feeds_softmax]
    assert len(logits) == 2 and {(a.scale_before, a.head_dim) for a in logits} == {(0.25, 16)}
    assert "PA106" not in ids("opt")


def test_pure_fp16_fused_softmax_is_not_reported():
    """GPT-2/BERT/T5 eager softmax on fp16 logits in a .half() model: SoftMax.cu keeps the max
    and the sum in fp32 (acc_type), so the fused kernel is no accumulation hazard."""
    for name in ("gpt2", "bert", "t5"):
        graph = graph_of(name, "get_eager_model", ("float16", "pure"))
        softmaxes = nodes(graph, {"softmax"})
        assert len(softmaxes) == ATTENTIONS[name], name
        assert {(n["compute_dtype"], n["kernel"].accumulate_dtype) for n in softmaxes} == {
            ("float16", "float32")}, name
        assert "PA101" not in ids(name, "get_eager_model", ("float16", "pure")), name


@pytest.mark.parametrize("name,head,embedding,size,padded", [
    ("gpt2", "lm_head", "transformer.wte", 50257, 50304),
    ("bert", "cls.predictions.decoder", "bert.embeddings.word_embeddings", 30522, 30528),
])
def test_unaligned_vocabularies_are_reported_once_per_tied_matrix(name, head, embedding, size, padded):
    """The output projection's GEMM; the embedding tied to it is the same matrix, looked up."""
    found = [f for f in scanned(name)[1] if f.rule == "PA202"]
    assert [(f.module, f.evidence["tied_with"]) for f in found] == [(head, [embedding])]
    assert {(f.evidence["size"], f.evidence["padded"]) for f in found} == {(size, padded)}
    assert {f.severity for f in found} == {"warning"}


@pytest.mark.parametrize("name", ["llama", "t5"])
def test_aligned_vocabularies_are_not_reported(name):
    """Llama's 32000 and T5's 32128 are multiples of 64."""
    assert "PA202" not in ids(name)


def test_findings_in_library_code_point_at_the_library_source(cli):
    result = cli("scan", model_path("gpt2"), "--format", "json")
    report = json.loads(result.output)
    assert report["models"][0]["status"] == "ok"
    vocab = [f for f in report["findings"] if f["rule"] == "PA202"]
    assert vocab
    for f in vocab:
        assert f["line"] is None  # the line is in transformers, not in the model file
        assert f["path"] == model_path("gpt2")
        source, _, line = f["evidence"]["source"].rpartition(":")
        assert source.endswith(os.path.join("transformers", "models", "gpt2", "modeling_gpt2.py"))
        assert int(line) > 0
