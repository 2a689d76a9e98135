"""Models without a model file: Hugging Face directories (config.json, with or without
safetensors shards) and ``module:callable`` specs, through scan, explain, plan and check.

Each Hugging Face directory is written here from a small config (weights from a random
init, saved by transformers' own ``save_pretrained``), and scans with the findings of the
model file a user would write for it: the class its config names, built from the config,
run on the inputs docs/model-sources.md documents (one sequence of 128 token ids with an all-ones
attention mask; one image of the config's size). The ``module:callable`` specs name a
package written to a temporary directory (torchvision does not install beside this torch).
"""
import json
import os

import pytest
from gate_models import write

pytest.importorskip("transformers")

import torch  # noqa: E402

#: model -> (config class, its arguments, the architecture, the example inputs a model file gives)
CONFIGS = {
    "gpt2": ("GPT2Config", dict(n_layer=2, n_embd=64, n_head=4, n_positions=128, vocab_size=50257,
                                use_cache=False), "GPT2LMHeadModel",
             "ids = torch.randint(0, 50257, (1, 128))\n"
             "    return {'input_ids': ids, 'attention_mask': torch.ones_like(ids)}"),
    "llama": ("LlamaConfig", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                  intermediate_size=128, max_position_embeddings=128, vocab_size=32000,
                                  use_cache=False), "LlamaForCausalLM",
              "ids = torch.randint(0, 32000, (1, 128))\n"
              "    return {'input_ids': ids, 'attention_mask': torch.ones_like(ids)}"),
    "vit": ("ViTConfig", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                              image_size=32, patch_size=8, num_labels=10), "ViTForImageClassification",
            "return {'pixel_values': torch.randn(1, 3, 32, 32)}"),
}
#: a weight the saved checkpoint sets out of float16's range, per model: PA303 with --weights
HOT_WEIGHT = {"gpt2": "transformer.h.0.mlp.c_fc.weight", "llama": "model.layers.0.mlp.up_proj.weight",
              "vit": "vit.layers.0.mlp.fc1.weight"}


def config(name):
    import transformers

    cls_name, kwargs, architecture, _ = CONFIGS[name]
    made = getattr(transformers, cls_name)(**kwargs)
    made.architectures = [architecture]
    return made


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    """name -> (directory with config.json only, directory with config.json and safetensors)."""
    import transformers

    root = tmp_path_factory.mktemp("hf")
    dirs = {}
    for name, (_, _, architecture, _) in CONFIGS.items():
        bare, weighted = root / f"{name}-config", root / f"{name}-weights"
        config(name).save_pretrained(bare)
        torch.manual_seed(0)
        model = getattr(transformers, architecture)(config(name))
        with torch.no_grad():
            model.get_parameter(HOT_WEIGHT[name])[0, 0] = 1e5  # above float16's 65504
        model.save_pretrained(weighted)
        dirs[name] = (str(bare), str(weighted))
    return dirs


def equivalent_model_file(root, name, directory) -> str:
    """The model file a user writes for the directory: its architecture from its config."""
    _, _, architecture, inputs = CONFIGS[name]
    return write(root, f"{name}_model.py", (
        f"import torch\nfrom transformers import AutoConfig, {architecture}\n\n\n"
        f"def get_model():\n    return {architecture}(AutoConfig.from_pretrained({directory!r})).eval()\n\n\n"
        f"def get_example_inputs():\n    {inputs}\n"))


def report(cli, *args):
    result = cli("scan", *args, "--format", "json", "--exit-zero")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    (model,) = document["models"]
    return model, document["findings"]


def what(findings) -> list:
    """The findings without the name of the model they were found in."""
    return sorted((f["rule"], f["severity"], f["module"], f["op"], f["line"], f["message"]) for f in findings)


# --------------------------------------------------------------------------- Hugging Face directories
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_hugging_face_directory_scans_as_its_model_file(cli, tmp_path, hf_dirs, name):
    bare, weighted = hf_dirs[name]
    file_model, file_findings = report(cli, equivalent_model_file(tmp_path, name, bare))
    assert file_model["status"] == "ok", file_model["error"]
    for directory in (bare, weighted, os.path.join(bare, "config.json")):
        model, findings = report(cli, directory)
        assert (model["path"], model["entry"], model["status"], model["frontend"]) == (
            directory, CONFIGS[name][2], "ok", "fake"), model["error"]
        assert model["nodes"] == file_model["nodes"]
        assert what(findings) == what(file_findings)
        assert {f["path"] for f in findings if f["line"] is None} <= {directory}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_bare_weights_flag_reads_the_directorys_shards(cli, hf_dirs, name):
    bare, weighted = hf_dirs[name]
    _, without = report(cli, weighted)
    model, findings = report(cli, weighted, "--weights")
    assert model["status"] == "ok", model["error"]
    hot = [f for f in findings if f["rule"] == "PA303"]
    assert not [f for f in without if f["rule"] == "PA303"]
    assert len(hot) == 1 and hot[0]["evidence"]["param"] == HOT_WEIGHT[name], hot
    result = cli("scan", bare, "--weights")
    assert result.exit_code == 2 and result.stderr.strip() == (
        f"precisionaudit: error: {bare}: --weights without a path reads the safetensors shards of a Hugging "
        f"Face directory, and {bare} holds no .safetensors shards; name the weights file")


def test_weights_and_data_work_with_a_hugging_face_directory(cli, hf_dirs):
    model, findings = report(cli, hf_dirs["llama"][1], "--weights", "--data", "example")
    assert model["status"] == "ok", model["error"]
    assert [f["evidence"]["param"] for f in findings if f["rule"] == "PA303"] == [HOT_WEIGHT["llama"]]


@pytest.mark.parametrize("name,shapes,inputs", [
    ("gpt2", (), [("int64", (1, 128))] * 2),  # input_ids and attention_mask
    ("gpt2", ("input_ids=2x64",), [("int64", (2, 64))] * 2),
    ("gpt2", ("2x64",), [("int64", (2, 64))] * 2),
    ("vit", (), [("float32", (1, 3, 32, 32))]),
    ("vit", ("pixel_values=2x3x32x32",), [("float32", (2, 3, 32, 32))]),
])
def test_generated_inputs_follow_the_config_and_input_shape(hf_dirs, name, shapes, inputs):
    from precisionaudit.capture.pytorch.capture import capture_file
    from precisionaudit.core.target import Target
    from precisionaudit.runtime.sources import LoadOptions

    captured = capture_file(hf_dirs[name][0], Target(), LoadOptions(input_shapes=shapes))
    assert captured.graph.graph["inputs"] == inputs


def _image_classifier(root, config_class, architecture, processor=None, **kwargs):
    import transformers

    made = getattr(transformers, config_class)(**kwargs)
    made.architectures = [architecture]
    made.save_pretrained(root)
    if processor is not None:
        (root / "preprocessor_config.json").write_text(json.dumps(processor))
    return str(root)


RESNET = dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=10)


@pytest.mark.parametrize("processor, size, note", [
    (None, 224, "no image_size in the config or a preprocessor_config.json: ResNetForImageClassification was "
                "given 224x224 images, ImageNet classifiers' convention (give the pixel values' dims with "
                "--input-shape pixel_values=1x3xHxW)"),
    ({"do_center_crop": True, "crop_size": {"height": 160, "width": 160}, "size": {"shortest_edge": 182}}, 160,
     "160x160 images, from preprocessor_config.json's crop_size"),
    ({"size": {"height": 96, "width": 128}}, (96, 128), "96x128 images, from preprocessor_config.json's size"),
])
def test_an_image_classifier_without_image_size_reads_its_processor_or_falls_back_with_a_note(
        tmp_path, processor, size, note):
    """ResNet, RegNet, BiT and PoolFormer configs carry no image_size (issue 44: they were refused)."""
    from precisionaudit.capture.pytorch.capture import capture_file
    from precisionaudit.core.target import Target

    captured = capture_file(_image_classifier(tmp_path, "ResNetConfig", "ResNetForImageClassification",
                                              processor, **RESNET), Target())
    height, width = (size, size) if isinstance(size, int) else size
    assert captured.frontend == "fake" and captured.graph.graph["inputs"] == [("float32", (1, 3, height, width))]
    assert captured.notes == [note]


def test_a_vision_tower_gives_its_image_size(tmp_path):
    """CLIP, SigLIP and MetaCLIP carry the size in vision_config.image_size."""
    from precisionaudit.capture.pytorch.capture import capture_file
    from precisionaudit.core.target import Target

    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=48,
                  patch_size=16)
    text = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=100)
    captured = capture_file(_image_classifier(tmp_path, "CLIPConfig", "CLIPForImageClassification",
                                              vision_config=vision, text_config=text, num_labels=3), Target())
    assert captured.graph.graph["inputs"] == [("float32", (1, 3, 48, 48))]
    assert captured.notes == ["48x48 images, from vision_config.image_size"]


def test_token_ids_ignore_a_position_limit_that_means_none(tmp_path):
    """XLNet's max_position_embeddings is -1 (no limit): 128 tokens, not a (1, -1) tensor."""
    import transformers

    from precisionaudit.runtime.pytorch.huggingface import huggingface_model

    made = transformers.XLNetConfig(n_layer=1, d_model=32, n_head=2, d_inner=64, vocab_size=100)
    made.architectures = ["XLNetLMHeadModel"]
    made.save_pretrained(tmp_path)
    assert huggingface_model(str(tmp_path)).make_inputs()["input_ids"].shape == (1, 128)


def test_an_image_classifier_gets_images_whatever_its_input_is_called(tmp_path):
    """Perceiver's image classifiers take ``inputs``; the image-classification mapping lists them."""
    import transformers

    from precisionaudit.runtime.pytorch.huggingface import huggingface_model

    made = transformers.PerceiverConfig(image_size=16, num_latents=8, d_latents=32, d_model=32, num_blocks=1,
                                        num_self_attends_per_block=1, num_labels=3)
    made.architectures = ["PerceiverForImageClassificationLearned"]
    made.save_pretrained(tmp_path)
    assert {k: tuple(v.shape) for k, v in huggingface_model(str(tmp_path)).make_inputs().items()} == {
        "inputs": (1, 3, 16, 16)}


def test_siglip2_gets_its_images_as_patches(tmp_path):
    """SigLIP 2 (NaFlex) takes patches with their spatial shapes: 1x3x224x224 pixel values made
    its forward fail ('mat1 and mat2 shapes cannot be multiplied'), which read as its own error.
    Its position embeddings are resized to the spatial shapes' values: the capture is eager."""
    from precisionaudit.capture.pytorch.capture import capture_file
    from precisionaudit.core.target import Target

    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_patches=16,
                  patch_size=4)
    text = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=100)
    captured = capture_file(_image_classifier(tmp_path, "Siglip2Config", "Siglip2ForImageClassification",
                                              vision_config=vision, text_config=text, num_labels=3), Target())
    assert captured.frontend == "eager" and "a limit of the scan's fake tensors" in captured.notes[0]
    assert captured.graph.graph["inputs"] == [("float32", (1, 16, 48)), ("int32", (1, 16)), ("int64", (1, 2))]


def test_a_composite_config_gives_a_text_model_its_text_config_as_the_auto_classes_do(tmp_path):
    """Qwen3.5's config.json (model_type qwen3_5) naming Qwen3_5ForCausalLM: the class takes the
    text config, as AutoModelForCausalLM.from_config hands it over."""
    import transformers

    from precisionaudit.runtime.pytorch.huggingface import huggingface_model

    text = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, vocab_size=1000, layer_types=["linear_attention", "full_attention"])
    made = transformers.Qwen3_5Config(text_config=text)
    made.architectures = ["Qwen3_5ForCausalLM"]
    made.save_pretrained(tmp_path)
    found = huggingface_model(str(tmp_path))
    model = found.make_model()
    assert type(model).__name__ == "Qwen3_5ForCausalLM" and type(model.config).__name__ == "Qwen3_5TextConfig"


def test_musicgen_builds_its_decoder_and_gets_one_sequence_per_codebook(tmp_path):
    """The causal-LM mapping pairs model_type musicgen with MusicgenForCausalLM, which takes the
    composite config's decoder and documents its ids as (batch_size * num_codebooks,
    sequence_length): it was refused with 'no vocab_size to draw token ids from'."""
    import transformers

    from precisionaudit.capture.pytorch.capture import capture_file
    from precisionaudit.core.target import Target

    made = transformers.MusicgenConfig(
        text_encoder=dict(model_type="t5", d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, vocab_size=100),
        audio_encoder=dict(model_type="encodec"),
        decoder=dict(hidden_size=32, ffn_dim=64, num_hidden_layers=1, num_attention_heads=2, vocab_size=64,
                     num_codebooks=3))
    made.architectures = ["MusicgenForCausalLM"]
    made.save_pretrained(tmp_path)
    captured = capture_file(str(tmp_path), Target())
    assert captured.frontend == "fake" and captured.graph.graph["inputs"][0] == ("int64", (3, 128))


def test_only_a_documented_codebook_layout_changes_the_sequences(tmp_path):
    """Moshi's config has num_codebooks too, but its causal LM takes (batch_size, sequence_length)."""
    from precisionaudit.runtime.pytorch.hf_inputs import _codebooks

    class Config:
        num_codebooks = 8

    class Moshi:
        def forward(self):
            """input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):"""

    class Musicgen:
        def forward(self):
            """input_ids (`torch.LongTensor` of shape `(batch_size * num_codebooks, sequence_length)`):"""

    assert (_codebooks(Moshi, Config()), _codebooks(Musicgen, Config()), _codebooks(Musicgen, object())) == (1, 8, 1)


def test_explain_plan_and_check_take_a_hugging_face_directory(cli, tmp_path, hf_dirs):
    directory = hf_dirs["llama"][1]
    assert cli("explain", directory).exit_code == 0
    plan = tmp_path / "amp_plan.yaml"
    result = cli("plan", directory, "-o", plan)
    assert result.exit_code == 0, result.stderr
    result = cli("check", directory, "--weights", "--plan", plan, "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    checked = json.loads(result.stdout)
    assert (checked["path"], checked["entry"]) == (directory, "LlamaForCausalLM")
    assert [v["name"] for v in checked["variants"]] == ["reference", "baseline", "planned"]
    assert checked["variants"][0]["status"] == "ok"


# --------------------------------------------------------------------------- module:callable
NET = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 30)

    def forward(self, x):
        return torch.log_softmax(self.proj(x), dim=-1).exp()


def build():
    return Net()


def inputs():
    return (torch.randn(2, 16),)


def broken():
    raise ValueError("checkpoint missing")


instance = Net()
"""


@pytest.fixture
def mypkg(tmp_path, monkeypatch):
    write(tmp_path, "mypkg/__init__.py", "")
    write(tmp_path, "mypkg/models.py", NET)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_module_callable_scans_as_its_model_file(cli, mypkg):
    file_model, file_findings = report(cli, write(mypkg, "net_model.py", NET.replace(
        "def build():", "def get_model():").replace("def inputs():", "def get_example_inputs():")))
    for args in (("mypkg.models:build", "--input-shape", "2x16"), ("mypkg.models:build", "--inputs", "mypkg.models:inputs"),
                 ("mypkg.models:instance", "--input-shape", "2x16")):
        model, findings = report(cli, *args)
        assert (model["path"], model["entry"], model["status"], model["frontend"]) == (
            args[0], args[0].split(":")[1], "ok", "fake"), model["error"]
        assert model["nodes"] == file_model["nodes"]
        assert [f[:4] for f in what(findings)] == [f[:4] for f in what(file_findings)]
        assert {f["model"] for f in findings} <= {args[0]}


def test_data_of_a_module_callable_comes_from_another(cli, mypkg):
    """--data module:callable: batches a million times larger than the example inputs make the
    range pass see the Linear's output overflow float16 (PA301); the example alone does not."""
    write(mypkg, "mypkg/data.py", "import torch\n\n\ndef batches():\n"
          "    for _ in range(2):\n        yield (torch.randn(2, 16) * 1e6,)\n")
    spec = ("mypkg.models:build", "--input-shape", "2x16", "--data")
    _, example = report(cli, *spec, "example")
    model, measured = report(cli, *spec, "mypkg.data:batches")
    assert model["status"] == "ok", model["error"]
    assert "PA301" in {f["rule"] for f in measured} and "PA301" not in {f["rule"] for f in example}


def test_a_module_callable_without_inputs_scans_its_structure(cli, mypkg):
    model, _ = report(cli, "mypkg.models:build")
    assert (model["status"], model["frontend"]) == ("ok", "structure")
    assert model["skipped"][0].startswith("no --input-shape")
    result = cli("check", "mypkg.models:build")
    assert result.exit_code == 2 and "check needs example inputs" in result.stderr and "--input-shape" in result.stderr


def test_a_module_callable_is_found_through_pythonpath(cli, mypkg, tmp_path_factory, monkeypatch):
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    assert cli("scan", "mypkg.models:build", "--input-shape", "2x16").exit_code == 2
    model, _ = report(cli, "mypkg.models:build", "--input-shape", "2x16", "--pythonpath", mypkg)
    assert model["status"] == "ok", model["error"]


def test_explain_plan_and_check_take_a_module_callable(cli, mypkg):
    spec = ("mypkg.models:build", "--inputs", "mypkg.models:inputs")
    assert "log_softmax" in cli("explain", *spec).stdout
    result = cli("plan", *spec, "-o", "amp_plan.yaml")
    assert result.exit_code == 0, result.stderr
    result = cli("check", *spec, "--plan", "amp_plan.yaml", "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    checked = json.loads(result.stdout)
    assert (checked["path"], checked["entry"]) == ("mypkg.models:build", "build")
    assert checked["variants"][0]["status"] == "ok"


# --------------------------------------------------------------------------- bad input
def one_line(result, *expected):
    lines = result.stderr.strip().splitlines()
    assert (result.exit_code, len(lines), result.stdout) == (2, 1, ""), result.stderr
    assert lines[0].startswith("precisionaudit: error:") and "Traceback" not in result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.fixture
def nothing_opened(monkeypatch):
    """Fails the test when a model source is opened (no model code imported, no class built)."""
    from precisionaudit.runtime.pytorch import source

    monkeypatch.setattr(source, "open_source", lambda *a, **k: pytest.fail("a model source was opened"))


@pytest.mark.parametrize("named", ["model", "model/config.json"])
@pytest.mark.parametrize("command", ["scan", "check"])
def test_a_config_without_model_type_is_one_line(cli, tmp_path, command, named, nothing_opened):
    write(tmp_path, "model/config.json", json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    one_line(cli(command, tmp_path / named), "config.json: no model_type")


def test_a_config_json_of_another_tool_is_no_model(cli, tmp_path, nothing_opened):
    """pre-commit hands over every changed .json file: a config.json that names no model_type
    or architectures is some other tool's, skipped as any other JSON file."""
    path = write(tmp_path, "config.json", json.dumps({"name": "web", "version": "1.0.0"}))
    assert cli("scan", path, "--skip-non-models").exit_code == 0
    one_line(cli("scan", path), "not a DeepSpeed or accelerate config")


@pytest.mark.parametrize("config,expected", [
    ({"model_type": "gpt2", "architectures": ["NopeForCausalLM"]}, "unknown architecture 'NopeForCausalLM'"),
    ({"model_type": "nopetype"}, "unknown model_type 'nopetype'"),
    ({"model_type": "gpt2", "architectures": ["LlamaForCausalLM"]}, "LlamaForCausalLM takes a LlamaConfig"),
])
def test_an_unknown_architecture_is_one_line_and_builds_nothing(cli, tmp_path, monkeypatch, config, expected):
    import transformers

    monkeypatch.setattr(transformers.PreTrainedModel, "__init__", lambda *a, **k: pytest.fail("a model was built"))
    write(tmp_path, "model/config.json", json.dumps(config))
    one_line(cli("scan", tmp_path / "model"), expected)


def test_a_missing_module_is_one_line(cli, mypkg):
    one_line(cli("scan", "nosuchpkg.models:build"), "no module named 'nosuchpkg'", "--pythonpath")
    one_line(cli("scan", "mypkg.models:nothing"), "mypkg.models has no attribute nothing")


def test_a_callable_that_raises_is_one_line(cli, mypkg):
    one_line(cli("scan", "mypkg.models:broken"), "broken() raised ValueError: checkpoint missing")


@pytest.mark.parametrize("args,expected", [
    (("mypkg.models:build", "--input-shape", "2x5"), "the forward failed on the example inputs"),
    (("mypkg.models:build", "--input-shape", "x=2x16", "--input-shape", "2x16"), "give every input a NAME= (keyword arguments) or none"),
    (("mypkg.models:build", "--input-shape", "2xlots"), "expected NAME=DIMS"),
])
def test_input_shapes_that_do_not_fit_a_module_callable_are_one_line(cli, mypkg, args, expected):
    one_line(cli("scan", *args), expected)


@pytest.mark.parametrize("name,shape,expected", [
    ("gpt2", "input_ids=1x4096", "GPT2LMHeadModel takes at most 128 tokens"),
    ("gpt2", "input_ids=1x2x3", "input_ids is (sequences, tokens)"),
    ("gpt2", "pixel_values=1x3x32x32", "GPT2LMHeadModel takes one generated input, input_ids"),
    ("vit", "pixel_values=1x1x32x32", "pixel_values is (images, 3 channels, height, width)"),
    ("vit", "1x3x48x48", "the forward failed on the example inputs"),
])
def test_input_shapes_that_do_not_fit_a_hugging_face_model_are_one_line(cli, hf_dirs, name, shape, expected):
    one_line(cli("scan", hf_dirs[name][0], "--input-shape", shape), expected)


def test_a_model_file_takes_no_input_shape(cli):
    from conftest import sample

    one_line(cli("scan", sample("pa101_softmax_hazard.py"), "--input-shape", "2x8"),
             "a model file's example inputs give the shapes")
