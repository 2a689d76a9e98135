"""A zoo of tiny real architectures built from their configs (random weights, no hub).

transformers models (language models with their real vocabulary, a padded attention mask
and labels; encoders, encoder-decoders, vision, audio, MoE, state-space) and, when
diffusers is installed, diffusers' UNets, VAEs and diffusion transformers. timm and
torchvision are not in the zoo: timm needs torchvision, whose wheel on the package index is
a CUDA build that does not load with the CPU torch here.

Each ``get_NAME`` builds one model; ``inputs_NAME`` gives its example inputs. Scan one with
``precisionaudit scan bench/zoo/hf_zoo.py --entry get_gpt2 --inputs inputs_gpt2``;
``bench/zoo_bench.py`` scans them all. Bench-only dependencies: transformers, diffusers.
"""
import torch
import transformers as tf

try:
    import diffusers
except ImportError:  # the diffusers part of the zoo is skipped
    diffusers = None

SEQ = 16
SMALL = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
#: decoder-only language models: name → (config class, extra config kwargs, vocabulary)
CAUSAL = {
    "gpt2": ("GPT2Config", dict(n_layer=2, n_embd=64, n_head=4, n_positions=128), 50257),
    "gpt2_eager": ("GPT2Config", dict(n_layer=2, n_embd=64, n_head=4, n_positions=128,
                                      attn_implementation="eager"), 50257),
    "llama": ("LlamaConfig", dict(SMALL, num_key_value_heads=2, max_position_embeddings=128), 32000),
    "llama_eager": ("LlamaConfig", dict(SMALL, num_key_value_heads=2, max_position_embeddings=128,
                                        attn_implementation="eager"), 32000),
    "mistral": ("MistralConfig", dict(SMALL, num_key_value_heads=2), 32000),
    "qwen2": ("Qwen2Config", dict(SMALL, num_key_value_heads=2), 151936),
    "qwen3": ("Qwen3Config", dict(SMALL, num_key_value_heads=2, head_dim=16), 151936),
    "gpt_neox": ("GPTNeoXConfig", SMALL, 50304),
    "opt": ("OPTConfig", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                              ffn_dim=128, word_embed_proj_dim=64), 50272),
    # eager attention that scales q before the matmul in full (q_proj(h) * scaling)
    "opt_eager": ("OPTConfig", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                    ffn_dim=128, word_embed_proj_dim=64, attn_implementation="eager"), 50272),
    "bloom": ("BloomConfig", dict(n_layer=2, hidden_size=64, n_head=4), 250880),
    "gptj": ("GPTJConfig", dict(n_layer=2, n_embd=64, n_head=4, rotary_dim=8, n_positions=128), 50400),
    "gpt_neo": ("GPTNeoConfig", dict(num_layers=2, hidden_size=64, num_heads=4,
                                     attention_types=[[["global", "local"], 1]], max_position_embeddings=128), 50257),
    "codegen": ("CodeGenConfig", dict(n_layer=2, n_embd=64, n_head=4, rotary_dim=8, n_positions=128), 51200),
    "falcon": ("FalconConfig", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4), 65024),
    # the ALiBi path: q @ k^T stored in fp16, upcast and scaled in place after it
    "falcon_alibi": ("FalconConfig", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                          alibi=True, attn_implementation="eager"), 65024),
    "phi": ("PhiConfig", SMALL, 51200),
    "phi3": ("Phi3Config", dict(SMALL, num_key_value_heads=2), 32064),
    "gemma": ("GemmaConfig", dict(SMALL, num_key_value_heads=2, head_dim=16), 256000),
    "gemma2": ("Gemma2Config", dict(SMALL, num_key_value_heads=2, head_dim=16), 256000),
    "stablelm": ("StableLmConfig", dict(SMALL, num_key_value_heads=2), 50304),
    "olmo": ("OlmoConfig", dict(SMALL, num_key_value_heads=2), 50304),
    "starcoder2": ("Starcoder2Config", dict(SMALL, num_key_value_heads=2), 49152),
    "gpt_bigcode": ("GPTBigCodeConfig", dict(n_layer=2, n_embd=64, n_head=4, n_positions=128), 49152),
    "granite": ("GraniteConfig", dict(SMALL, num_key_value_heads=2), 49155),
    "persimmon": ("PersimmonConfig", SMALL, 262144),
    "mixtral": ("MixtralConfig", dict(SMALL, num_key_value_heads=2, num_local_experts=4,
                                      num_experts_per_tok=2), 32000),
    "qwen2_moe": ("Qwen2MoeConfig", dict(SMALL, num_key_value_heads=2, num_experts=4,
                                         num_experts_per_tok=2, moe_intermediate_size=64,
                                         shared_expert_intermediate_size=64), 151936),
    "olmoe": ("OlmoeConfig", dict(SMALL, num_key_value_heads=2, num_experts=4,
                                  num_experts_per_tok=2), 50304),
    "mamba": ("MambaConfig", dict(num_hidden_layers=2, hidden_size=64, state_size=8), 50280),
    "rwkv": ("RwkvConfig", dict(num_hidden_layers=2, hidden_size=64, attention_hidden_size=64,
                                intermediate_size=128, context_length=128), 50277),
    "xlnet": ("XLNetConfig", dict(n_layer=2, d_model=64, n_head=4, d_inner=128), 32000),
}
#: masked / encoder-only language models: name → (config, kwargs, vocabulary, model class)
MASKED = {
    "bert": ("BertConfig", dict(SMALL, max_position_embeddings=128), 30522, "BertForMaskedLM"),
    "bert_eager": ("BertConfig", dict(SMALL, max_position_embeddings=128, attn_implementation="eager"),
                   30522, "BertForMaskedLM"),
    "roberta": ("RobertaConfig", dict(SMALL, max_position_embeddings=130), 50265, "RobertaForMaskedLM"),
    "electra": ("ElectraConfig", dict(SMALL, embedding_size=64), 30522, "ElectraForMaskedLM"),
    "distilbert": ("DistilBertConfig", dict(n_layers=2, dim=64, n_heads=4, hidden_dim=128), 30522,
                   "DistilBertForMaskedLM"),
    "albert": ("AlbertConfig", dict(SMALL, embedding_size=32), 30000, "AlbertForMaskedLM"),
    "deberta_v2": ("DebertaV2Config", SMALL, 128100, "DebertaV2ForMaskedLM"),
    "mpnet": ("MPNetConfig", SMALL, 30527, "MPNetForMaskedLM"),
    "modernbert": ("ModernBertConfig", dict(SMALL, global_attn_every_n_layers=2), 50368,
                   "ModernBertForMaskedLM"),
    "longformer": ("LongformerConfig", dict(SMALL, attention_window=8, max_position_embeddings=130),
                   50265, "LongformerForMaskedLM"),
}
#: encoder-decoders: name → (config, kwargs, vocabulary, model class)
SEQ2SEQ = {
    "t5": ("T5Config", dict(num_layers=2, num_decoder_layers=2, d_model=64, d_kv=16, num_heads=4,
                            d_ff=128, decoder_start_token_id=0), 32128, "T5ForConditionalGeneration"),
    "mt5": ("MT5Config", dict(num_layers=2, num_decoder_layers=2, d_model=64, d_kv=16, num_heads=4,
                              d_ff=128, decoder_start_token_id=0), 250112, "MT5ForConditionalGeneration"),
    "bart": ("BartConfig", dict(encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4,
                                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128),
             50265, "BartForConditionalGeneration"),
    "pegasus": ("PegasusConfig", dict(encoder_layers=2, decoder_layers=2, d_model=64,
                                      encoder_attention_heads=4, decoder_attention_heads=4,
                                      encoder_ffn_dim=128, decoder_ffn_dim=128), 96103,
                "PegasusForConditionalGeneration"),
    "marian": ("MarianConfig", dict(encoder_layers=2, decoder_layers=2, d_model=64,
                                    encoder_attention_heads=4, decoder_attention_heads=4,
                                    encoder_ffn_dim=128, decoder_ffn_dim=128, decoder_start_token_id=0,
                                    pad_token_id=58100), 58101, "MarianMTModel"),
}
#: vision: name → (config, kwargs, model class, image size)
VISION = {
    "vit": ("ViTConfig", dict(SMALL, image_size=32, patch_size=8), "ViTForImageClassification", 32),
    "deit": ("DeiTConfig", dict(SMALL, image_size=32, patch_size=8), "DeiTForImageClassification", 32),
    "beit": ("BeitConfig", dict(SMALL, image_size=32, patch_size=8), "BeitForImageClassification", 32),
    "dinov2": ("Dinov2Config", dict(SMALL, image_size=32, patch_size=8), "Dinov2Model", 32),
    "swin": ("SwinConfig", dict(image_size=32, patch_size=4, embed_dim=32, depths=[1, 1],
                                num_heads=[2, 4], window_size=4), "SwinForImageClassification", 32),
    "convnext": ("ConvNextConfig", dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]),
                 "ConvNextForImageClassification", 32),
    "convnextv2": ("ConvNextV2Config", dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]),
                   "ConvNextV2ForImageClassification", 32),
    "resnet": ("ResNetConfig", dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                    embedding_size=16), "ResNetForImageClassification", 32),
    "regnet": ("RegNetConfig", dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                    embedding_size=16, groups_width=8), "RegNetForImageClassification", 32),
    "efficientnet": ("EfficientNetConfig", dict(image_size=32, width_coefficient=0.25,
                                                depth_coefficient=0.25, hidden_dim=320),
                     "EfficientNetForImageClassification", 32),
    "mobilenet_v2": ("MobileNetV2Config", dict(image_size=32, depth_multiplier=0.35),
                     "MobileNetV2ForImageClassification", 32),
    "mobilevit": ("MobileViTConfig", dict(image_size=32, hidden_sizes=[32, 48, 64],
                                          neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 128]),
                  "MobileViTForImageClassification", 32),
    "segformer": ("SegformerConfig", dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                          decoder_hidden_size=64), "SegformerForSemanticSegmentation", 32),
    "poolformer": ("PoolFormerConfig", dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]),
                   "PoolFormerForImageClassification", 32),
    "levit": ("LevitConfig", dict(image_size=32, hidden_sizes=[32, 64, 96], num_attention_heads=[2, 2, 2],
                                  depths=[1, 1, 1], key_dim=[16, 16, 16]), "LevitForImageClassification", 32),
    "focalnet": ("FocalNetConfig", dict(image_size=32, embed_dim=16, depths=[1, 1], hidden_sizes=[16, 32]),
                 "FocalNetForImageClassification", 32),
}


def _lm_inputs(vocab, labels=True, decoder=False):
    def make():
        torch.manual_seed(0)
        ids = torch.randint(0, vocab, (2, SEQ))
        mask = torch.ones_like(ids)
        mask[1, SEQ - 4:] = 0  # a padded row, so the attention mask is not all ones
        out = {"input_ids": ids, "attention_mask": mask}
        if labels:
            out["labels"] = ids
        if decoder and not labels:
            out["decoder_input_ids"] = ids
        return out
    return make


def _transformers(config_name, kwargs, model_name):
    def build():
        torch.manual_seed(0)
        config = getattr(tf, config_name)(**kwargs)
        if hasattr(config, "use_cache"):
            config.use_cache = False
        return getattr(tf, model_name)(config).eval()
    return build


def _causal_class(config_name):
    return config_name.replace("Config", "ForCausalLM")


ZOO = {}
for _name, (_cfg, _kw, _vocab) in CAUSAL.items():
    _cls = {"XLNetConfig": "XLNetLMHeadModel", "RwkvConfig": "RwkvForCausalLM",
            "GPT2Config": "GPT2LMHeadModel"}.get(_cfg, _causal_class(_cfg))
    ZOO[_name] = (_transformers(_cfg, dict(_kw, vocab_size=_vocab), _cls), _lm_inputs(_vocab))
for _name, (_cfg, _kw, _vocab, _cls) in MASKED.items():
    ZOO[_name] = (_transformers(_cfg, dict(_kw, vocab_size=_vocab), _cls), _lm_inputs(_vocab))
for _name, (_cfg, _kw, _vocab, _cls) in SEQ2SEQ.items():
    ZOO[_name] = (_transformers(_cfg, dict(_kw, vocab_size=_vocab), _cls), _lm_inputs(_vocab))
for _name, (_cfg, _kw, _cls, _size) in VISION.items():
    ZOO[_name] = (_transformers(_cfg, _kw, _cls),
                  (lambda s: lambda: {"pixel_values": torch.randn(2, 3, s, s)})(_size))
ZOO["whisper"] = (
    _transformers("WhisperConfig", dict(encoder_layers=2, decoder_layers=2, d_model=64,
                                        encoder_attention_heads=4, decoder_attention_heads=4,
                                        encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=80,
                                        max_source_positions=32, max_target_positions=32),
                  "WhisperForConditionalGeneration"),
    lambda: {"input_features": torch.randn(2, 80, 64), "decoder_input_ids": torch.randint(0, 51865, (2, 8))})
ZOO["wav2vec2"] = (
    _transformers("Wav2Vec2Config", dict(SMALL, conv_dim=(32, 32), conv_stride=(5, 2),
                                         conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                         num_conv_pos_embedding_groups=4), "Wav2Vec2ForCTC"),
    lambda: {"input_values": torch.randn(2, 800)})
ZOO["clip"] = (
    _transformers("CLIPConfig", dict(text_config=dict(SMALL, vocab_size=49408, max_position_embeddings=32),
                                     vision_config=dict(SMALL, image_size=32, patch_size=8),
                                     projection_dim=32), "CLIPModel"),
    lambda: {"input_ids": torch.randint(0, 49408, (2, SEQ)), "pixel_values": torch.randn(2, 3, 32, 32),
             "return_loss": True})


if diffusers is not None:
    def _diffusers(cls_name, **kwargs):
        def build():
            torch.manual_seed(0)
            return getattr(diffusers, cls_name)(**kwargs).eval()
        return build

    _T = lambda: torch.tensor([10.0, 500.0])  # noqa: E731 - two timesteps
    ZOO["unet2d"] = (_diffusers("UNet2DModel", sample_size=16, block_out_channels=(32, 64),
                                layers_per_block=1, norm_num_groups=8,
                                down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                up_block_types=("AttnUpBlock2D", "UpBlock2D")),
                     lambda: {"sample": torch.randn(2, 3, 16, 16), "timestep": _T()})
    ZOO["unet2d_condition"] = (
        _diffusers("UNet2DConditionModel", sample_size=16, block_out_channels=(32, 64),
                   layers_per_block=1, norm_num_groups=8, cross_attention_dim=32, attention_head_dim=8,
                   down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                   up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")),
        lambda: {"sample": torch.randn(2, 4, 16, 16), "timestep": _T(),
                 "encoder_hidden_states": torch.randn(2, 8, 32)})
    ZOO["autoencoder_kl"] = (
        _diffusers("AutoencoderKL", block_out_channels=(32, 64), norm_num_groups=8, latent_channels=4,
                   down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2),
        lambda: {"sample": torch.randn(2, 3, 32, 32)})
    ZOO["dit"] = (_diffusers("DiTTransformer2DModel", num_attention_heads=2, attention_head_dim=16,
                             in_channels=4, num_layers=2, sample_size=8, patch_size=2, norm_num_groups=8),
                  lambda: {"hidden_states": torch.randn(2, 4, 8, 8), "timestep": _T().long(),
                           "class_labels": torch.tensor([1, 2])})
    ZOO["sd3_transformer"] = (
        _diffusers("SD3Transformer2DModel", sample_size=8, patch_size=2, in_channels=4, num_layers=2,
                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                   caption_projection_dim=32, pooled_projection_dim=16, out_channels=4),
        lambda: {"hidden_states": torch.randn(2, 4, 8, 8), "encoder_hidden_states": torch.randn(2, 8, 32),
                 "pooled_projections": torch.randn(2, 16), "timestep": _T()})
    ZOO["flux_transformer"] = (
        _diffusers("FluxTransformer2DModel", patch_size=1, in_channels=16, num_layers=1,
                   num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
                   joint_attention_dim=32, pooled_projection_dim=16, axes_dims_rope=(4, 6, 6)),
        lambda: {"hidden_states": torch.randn(2, 16, 16), "encoder_hidden_states": torch.randn(2, 8, 32),
                 "pooled_projections": torch.randn(2, 16), "timestep": torch.tensor([0.1, 0.9]),
                 "img_ids": torch.zeros(16, 3), "txt_ids": torch.zeros(8, 3)})
    ZOO["vq_model"] = (_diffusers("VQModel", block_out_channels=(32, 64), norm_num_groups=8,
                                  down_block_types=("DownEncoderBlock2D",) * 2,
                                  up_block_types=("UpDecoderBlock2D",) * 2, num_vq_embeddings=64,
                                  vq_embed_dim=4, latent_channels=4),
                       lambda: {"sample": torch.randn(2, 3, 32, 32)})
    ZOO["pixart"] = (_diffusers("PixArtTransformer2DModel", num_attention_heads=2, attention_head_dim=16,
                                in_channels=4, out_channels=8, num_layers=2, sample_size=8,
                                cross_attention_dim=32, caption_channels=32, norm_num_groups=8),
                     lambda: {"hidden_states": torch.randn(2, 4, 8, 8),
                              "encoder_hidden_states": torch.randn(2, 8, 32), "timestep": _T().long(),
                              "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}})


# one explicit name per entry, so that `--entry get_NAME` finds it in the file's text
get_gpt2 = ZOO["gpt2"][0]
inputs_gpt2 = ZOO["gpt2"][1]
get_gpt2_eager = ZOO["gpt2_eager"][0]
inputs_gpt2_eager = ZOO["gpt2_eager"][1]
get_llama = ZOO["llama"][0]
inputs_llama = ZOO["llama"][1]
get_llama_eager = ZOO["llama_eager"][0]
inputs_llama_eager = ZOO["llama_eager"][1]
get_mistral = ZOO["mistral"][0]
inputs_mistral = ZOO["mistral"][1]
get_qwen2 = ZOO["qwen2"][0]
inputs_qwen2 = ZOO["qwen2"][1]
get_qwen3 = ZOO["qwen3"][0]
inputs_qwen3 = ZOO["qwen3"][1]
get_gpt_neox = ZOO["gpt_neox"][0]
inputs_gpt_neox = ZOO["gpt_neox"][1]
get_opt = ZOO["opt"][0]
inputs_opt = ZOO["opt"][1]
get_opt_eager = ZOO["opt_eager"][0]
inputs_opt_eager = ZOO["opt_eager"][1]
get_bloom = ZOO["bloom"][0]
inputs_bloom = ZOO["bloom"][1]
get_gptj = ZOO["gptj"][0]
inputs_gptj = ZOO["gptj"][1]
get_gpt_neo = ZOO["gpt_neo"][0]
inputs_gpt_neo = ZOO["gpt_neo"][1]
get_codegen = ZOO["codegen"][0]
inputs_codegen = ZOO["codegen"][1]
get_falcon = ZOO["falcon"][0]
inputs_falcon = ZOO["falcon"][1]
get_falcon_alibi = ZOO["falcon_alibi"][0]
inputs_falcon_alibi = ZOO["falcon_alibi"][1]
get_phi = ZOO["phi"][0]
inputs_phi = ZOO["phi"][1]
get_phi3 = ZOO["phi3"][0]
inputs_phi3 = ZOO["phi3"][1]
get_gemma = ZOO["gemma"][0]
inputs_gemma = ZOO["gemma"][1]
get_gemma2 = ZOO["gemma2"][0]
inputs_gemma2 = ZOO["gemma2"][1]
get_stablelm = ZOO["stablelm"][0]
inputs_stablelm = ZOO["stablelm"][1]
get_olmo = ZOO["olmo"][0]
inputs_olmo = ZOO["olmo"][1]
get_starcoder2 = ZOO["starcoder2"][0]
inputs_starcoder2 = ZOO["starcoder2"][1]
get_gpt_bigcode = ZOO["gpt_bigcode"][0]
inputs_gpt_bigcode = ZOO["gpt_bigcode"][1]
get_granite = ZOO["granite"][0]
inputs_granite = ZOO["granite"][1]
get_persimmon = ZOO["persimmon"][0]
inputs_persimmon = ZOO["persimmon"][1]
get_mixtral = ZOO["mixtral"][0]
inputs_mixtral = ZOO["mixtral"][1]
get_qwen2_moe = ZOO["qwen2_moe"][0]
inputs_qwen2_moe = ZOO["qwen2_moe"][1]
get_olmoe = ZOO["olmoe"][0]
inputs_olmoe = ZOO["olmoe"][1]
get_mamba = ZOO["mamba"][0]
inputs_mamba = ZOO["mamba"][1]
get_rwkv = ZOO["rwkv"][0]
inputs_rwkv = ZOO["rwkv"][1]
get_xlnet = ZOO["xlnet"][0]
inputs_xlnet = ZOO["xlnet"][1]
get_bert = ZOO["bert"][0]
inputs_bert = ZOO["bert"][1]
get_bert_eager = ZOO["bert_eager"][0]
inputs_bert_eager = ZOO["bert_eager"][1]
get_roberta = ZOO["roberta"][0]
inputs_roberta = ZOO["roberta"][1]
get_electra = ZOO["electra"][0]
inputs_electra = ZOO["electra"][1]
get_distilbert = ZOO["distilbert"][0]
inputs_distilbert = ZOO["distilbert"][1]
get_albert = ZOO["albert"][0]
inputs_albert = ZOO["albert"][1]
get_deberta_v2 = ZOO["deberta_v2"][0]
inputs_deberta_v2 = ZOO["deberta_v2"][1]
get_mpnet = ZOO["mpnet"][0]
inputs_mpnet = ZOO["mpnet"][1]
get_modernbert = ZOO["modernbert"][0]
inputs_modernbert = ZOO["modernbert"][1]
get_longformer = ZOO["longformer"][0]
inputs_longformer = ZOO["longformer"][1]
get_t5 = ZOO["t5"][0]
inputs_t5 = ZOO["t5"][1]
get_mt5 = ZOO["mt5"][0]
inputs_mt5 = ZOO["mt5"][1]
get_bart = ZOO["bart"][0]
inputs_bart = ZOO["bart"][1]
get_pegasus = ZOO["pegasus"][0]
inputs_pegasus = ZOO["pegasus"][1]
get_marian = ZOO["marian"][0]
inputs_marian = ZOO["marian"][1]
get_vit = ZOO["vit"][0]
inputs_vit = ZOO["vit"][1]
get_deit = ZOO["deit"][0]
inputs_deit = ZOO["deit"][1]
get_beit = ZOO["beit"][0]
inputs_beit = ZOO["beit"][1]
get_dinov2 = ZOO["dinov2"][0]
inputs_dinov2 = ZOO["dinov2"][1]
get_swin = ZOO["swin"][0]
inputs_swin = ZOO["swin"][1]
get_convnext = ZOO["convnext"][0]
inputs_convnext = ZOO["convnext"][1]
get_convnextv2 = ZOO["convnextv2"][0]
inputs_convnextv2 = ZOO["convnextv2"][1]
get_resnet = ZOO["resnet"][0]
inputs_resnet = ZOO["resnet"][1]
get_regnet = ZOO["regnet"][0]
inputs_regnet = ZOO["regnet"][1]
get_efficientnet = ZOO["efficientnet"][0]
inputs_efficientnet = ZOO["efficientnet"][1]
get_mobilenet_v2 = ZOO["mobilenet_v2"][0]
inputs_mobilenet_v2 = ZOO["mobilenet_v2"][1]
get_mobilevit = ZOO["mobilevit"][0]
inputs_mobilevit = ZOO["mobilevit"][1]
get_segformer = ZOO["segformer"][0]
inputs_segformer = ZOO["segformer"][1]
get_poolformer = ZOO["poolformer"][0]
inputs_poolformer = ZOO["poolformer"][1]
get_levit = ZOO["levit"][0]
inputs_levit = ZOO["levit"][1]
get_focalnet = ZOO["focalnet"][0]
inputs_focalnet = ZOO["focalnet"][1]
get_whisper = ZOO["whisper"][0]
inputs_whisper = ZOO["whisper"][1]
get_wav2vec2 = ZOO["wav2vec2"][0]
inputs_wav2vec2 = ZOO["wav2vec2"][1]
get_clip = ZOO["clip"][0]
inputs_clip = ZOO["clip"][1]

if diffusers is not None:
    get_unet2d = ZOO["unet2d"][0]
    inputs_unet2d = ZOO["unet2d"][1]
    get_unet2d_condition = ZOO["unet2d_condition"][0]
    inputs_unet2d_condition = ZOO["unet2d_condition"][1]
    get_autoencoder_kl = ZOO["autoencoder_kl"][0]
    inputs_autoencoder_kl = ZOO["autoencoder_kl"][1]
    get_dit = ZOO["dit"][0]
    inputs_dit = ZOO["dit"][1]
    get_sd3_transformer = ZOO["sd3_transformer"][0]
    inputs_sd3_transformer = ZOO["sd3_transformer"][1]
    get_flux_transformer = ZOO["flux_transformer"][0]
    inputs_flux_transformer = ZOO["flux_transformer"][1]
    get_vq_model = ZOO["vq_model"][0]
    inputs_vq_model = ZOO["vq_model"][1]
    get_pixart = ZOO["pixart"][0]
    inputs_pixart = ZOO["pixart"][1]
