"""The held-out zoo: architectures the rules were never tuned on (issue 36, part 6).

None of these is in ``hf_zoo.py``, and no rule was written or adjusted while looking at
them before their first scan. Built as ``hf_zoo.py`` builds its models: small configs that
keep each architecture's own parts (its norms, attention variant, recurrence, MoE router,
detection head), random weights (``torch.manual_seed(0)``), no hub. transformers models
first, then (when diffusers is installed) diffusers' video and image transformers.

Each ``get_NAME`` builds one model; ``inputs_NAME`` gives its example inputs. Scan one with
``precisionaudit scan bench/zoo/new_zoo.py --entry get_rt_detr --inputs inputs_rt_detr``;
``python bench/zoo_bench.py --zoo new`` scans them all, judged in ``bench/zoo/new_verdicts.md``.
"""
import torch
from hf_zoo import SEQ, SMALL, _lm_inputs, _transformers

try:
    import diffusers
except ImportError:  # the diffusers part of the zoo is skipped
    diffusers = None

KV = dict(SMALL, num_key_value_heads=2)
#: decoder-only language models: name → (config class, extra config kwargs, vocabulary, model class)
CAUSAL = {
    "cohere": ("CohereConfig", KV, 256000, "CohereForCausalLM"),
    "glm4": ("Glm4Config", dict(KV, head_dim=16), 151552, "Glm4ForCausalLM"),
    "nemotron": ("NemotronConfig", KV, 256000, "NemotronForCausalLM"),
    "olmo2": ("Olmo2Config", KV, 100352, "Olmo2ForCausalLM"),
    "gemma3": ("Gemma3TextConfig", dict(KV, head_dim=16, sliding_window=8), 262144, "Gemma3ForCausalLM"),
    "helium": ("HeliumConfig", dict(KV, head_dim=16), 48000, "HeliumForCausalLM"),
    "lfm2": ("Lfm2Config", dict(KV, layer_types=["conv", "full_attention"]), 65536, "Lfm2ForCausalLM"),
    "qwen3_moe": ("Qwen3MoeConfig", dict(KV, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                         moe_intermediate_size=64), 151936, "Qwen3MoeForCausalLM"),
    "granitemoe": ("GraniteMoeConfig", dict(KV, num_local_experts=4, num_experts_per_tok=2), 49155,
                   "GraniteMoeForCausalLM"),
    "phimoe": ("PhimoeConfig", dict(KV, num_local_experts=4, num_experts_per_tok=2), 32064,
               "PhimoeForCausalLM"),
    "dbrx": ("DbrxConfig", dict(d_model=64, n_heads=4, n_layers=2, max_seq_len=128,
                                attn_config=dict(kv_n_heads=2, rope_theta=10000.0, clip_qkv=8.0),
                                ffn_config=dict(ffn_hidden_size=128, moe_num_experts=4, moe_top_k=2)),
             100352, "DbrxForCausalLM"),
    "gpt_oss": ("GptOssConfig", dict(KV, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                                     sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
                201088, "GptOssForCausalLM"),
    # multi-head latent attention (low-rank q and kv, a rope part and a no-rope part of each
    # head), a sigmoid router with group-limited top-k, a dense first layer, shared experts
    "deepseek_v3": ("DeepseekV3Config", dict(hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                                             moe_intermediate_size=32, n_routed_experts=8, n_shared_experts=1,
                                             num_experts_per_tok=2, n_group=2, topk_group=1,
                                             first_k_dense_replace=1, num_attention_heads=4,
                                             num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16,
                                             qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16),
                    129280, "DeepseekV3ForCausalLM"),
    # Mamba and attention layers, MoE every other layer (torch's reference scan, no kernels)
    "jamba": ("JambaConfig", dict(KV, num_experts=4, num_experts_per_tok=2, expert_layer_period=2,
                                  expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1,
                                  mamba_d_state=8, mamba_dt_rank=8, use_mamba_kernels=False),
              65536, "JambaForCausalLM"),
    "bamba": ("BambaConfig", dict(KV, mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=1,
                                  mamba_d_state=16, attn_layer_indices=[1]), 128256, "BambaForCausalLM"),
    "mamba2": ("Mamba2Config", dict(num_hidden_layers=2, hidden_size=64, num_heads=8, head_dim=16,
                                    state_size=16, n_groups=1, expand=2, chunk_size=8), 50288,
               "Mamba2ForCausalLM"),
    "falcon_mamba": ("FalconMambaConfig", dict(num_hidden_layers=2, hidden_size=64, state_size=8), 65024,
                     "FalconMambaForCausalLM"),
    # Griffin: two RG-LRU recurrent blocks and a local-attention block
    "recurrent_gemma": ("RecurrentGemmaConfig", dict(num_hidden_layers=3, hidden_size=64, lru_width=64,
                                                     num_attention_heads=4, num_key_value_heads=1,
                                                     intermediate_size=128, attention_window_size=16,
                                                     block_types=["recurrent", "recurrent", "attention"]),
                        256000, "RecurrentGemmaForCausalLM"),
}
#: vision: name → (config, kwargs, model class, image size)
VISION = {
    "hiera": ("HieraConfig", dict(embed_dim=16, image_size=[64, 64], patch_size=[7, 7], patch_stride=[4, 4],
                                  patch_padding=[3, 3], depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8],
                                  masked_unit_size=[8, 8], query_stride=[2, 2]),
              "HieraForImageClassification", 64),
    "pvt_v2": ("PvtV2Config", dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                   num_attention_heads=[1, 2, 4, 8]), "PvtV2ForImageClassification", 64),
    "vitdet": ("VitDetConfig", dict(SMALL, image_size=32, patch_size=8, pretrain_image_size=32,
                                    use_relative_position_embeddings=True, window_size=2,
                                    window_block_indices=[0]), "VitDetModel", 32),
    "bit": ("BitConfig", dict(hidden_sizes=[128, 128, 256, 256], depths=[1, 1, 1, 1], embedding_size=32),
            "BitForImageClassification", 32),
    "swinv2": ("Swinv2Config", dict(image_size=32, patch_size=4, embed_dim=32, depths=[1, 1],
                                    num_heads=[2, 4], window_size=4), "Swinv2ForImageClassification", 32),
    "mobilevitv2": ("MobileViTV2Config", dict(image_size=64, width_multiplier=0.25),
                    "MobileViTV2ForImageClassification", 64),
    "dpt": ("DPTConfig", dict(SMALL, num_hidden_layers=4, image_size=32, patch_size=8,
                              backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[16, 32, 64, 64],
                              fusion_hidden_size=32, head_in_index=-1),
            "DPTForDepthEstimation", 32),
}

DETR_RESNET = dict(use_timm_backbone=False, backbone_config=dict(
    model_type="resnet", hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], embedding_size=16,
    out_features=["stage2", "stage3", "stage4"]))


def _pixels(size):
    return lambda: {"pixel_values": torch.randn(2, 3, size, size)}


def _detection_labels(n=2):
    torch.manual_seed(1)
    return [{"class_labels": torch.tensor([1, 3]), "boxes": torch.tensor([[0.3, 0.4, 0.2, 0.3], [0.6, 0.5, 0.3, 0.4]])}
            for _ in range(n)]


ZOO = {}
for _name, (_cfg, _kw, _vocab, _cls) in CAUSAL.items():
    ZOO[_name] = (_transformers(_cfg, dict(_kw, vocab_size=_vocab), _cls), _lm_inputs(_vocab))
for _name, (_cfg, _kw, _cls, _size) in VISION.items():
    ZOO[_name] = (_transformers(_cfg, _kw, _cls), _pixels(_size))
ZOO["hubert"] = (
    _transformers("HubertConfig", dict(SMALL, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
                                       num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
                  "HubertForCTC"),
    lambda: {"input_values": torch.randn(2, 800)})
ZOO["wavlm"] = (
    _transformers("WavLMConfig", dict(SMALL, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
                                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                      num_buckets=32, max_bucket_distance=64), "WavLMForCTC"),
    lambda: {"input_values": torch.randn(2, 800)})
# Moonshine: head dim 36 (288 / 8) as in moonshine-tiny, a conv front end on raw audio
ZOO["moonshine"] = (
    _transformers("MoonshineConfig", dict(hidden_size=288, intermediate_size=1152, encoder_num_hidden_layers=1,
                                          decoder_num_hidden_layers=1, encoder_num_attention_heads=8,
                                          decoder_num_attention_heads=8, vocab_size=32768),
                  "MoonshineForConditionalGeneration"),
    lambda: {"input_values": torch.randn(2, 1600), "decoder_input_ids": torch.randint(0, 32768, (2, 8))})
ZOO["owlvit"] = (
    _transformers("OwlViTConfig", dict(text_config=dict(SMALL, vocab_size=49408, max_position_embeddings=16),
                                       vision_config=dict(SMALL, image_size=32, patch_size=8),
                                       projection_dim=64), "OwlViTForObjectDetection"),
    lambda: {"input_ids": torch.randint(0, 49408, (4, SEQ)), "attention_mask": torch.ones(4, SEQ, dtype=torch.long),
             "pixel_values": torch.randn(2, 3, 32, 32)})
ZOO["siglip"] = (
    _transformers("SiglipConfig", dict(text_config=dict(SMALL, vocab_size=32000, max_position_embeddings=16),
                                       vision_config=dict(SMALL, image_size=32, patch_size=8)), "SiglipModel"),
    lambda: {"input_ids": torch.randint(0, 32000, (2, SEQ)), "pixel_values": torch.randn(2, 3, 32, 32),
             "return_loss": True})
# RT-DETR: its own ResNet-vd backbone, hybrid encoder, deformable decoder (inverse_sigmoid)
ZOO["rt_detr"] = (
    _transformers("RTDetrConfig", dict(backbone_config=dict(model_type="rt_detr_resnet", hidden_sizes=[32, 64, 128, 256],
                                                            depths=[1, 1, 1, 1], embedding_size=16,
                                                            out_features=["stage2", "stage3", "stage4"]),
                                       encoder_in_channels=[64, 128, 256], encoder_hidden_dim=32,
                                       decoder_in_channels=[32, 32, 32],
                                       encoder_ffn_dim=64, d_model=32, decoder_ffn_dim=64, decoder_layers=2,
                                       num_queries=20, decoder_n_points=2, num_denoising=0,
                                       encoder_attention_heads=4, decoder_attention_heads=4),
                  "RTDetrForObjectDetection"),
    _pixels(64))
ZOO["conditional_detr"] = (
    _transformers("ConditionalDetrConfig", dict(DETR_RESNET, d_model=32, encoder_layers=1, decoder_layers=1,
                                                encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=20,
                                                encoder_attention_heads=4, decoder_attention_heads=4),
                  "ConditionalDetrForObjectDetection"),
    _pixels(64))
ZOO["deformable_detr"] = (
    _transformers("DeformableDetrConfig", dict(DETR_RESNET, d_model=32, encoder_layers=1, decoder_layers=2,
                                               encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=20,
                                               encoder_attention_heads=4, decoder_attention_heads=4,
                                               encoder_n_points=2, decoder_n_points=2, num_feature_levels=3),
                  "DeformableDetrForObjectDetection"),
    _pixels(64))


if diffusers is not None:
    from hf_zoo import _T, _diffusers

    ZOO["wan"] = (_diffusers("WanTransformer3DModel", patch_size=(1, 2, 2), num_attention_heads=2,
                             attention_head_dim=16, in_channels=4, out_channels=4, text_dim=32, freq_dim=32,
                             ffn_dim=64, num_layers=2, rope_max_seq_len=32),
                  lambda: {"hidden_states": torch.randn(2, 4, 2, 8, 8), "timestep": _T().long(),
                           "encoder_hidden_states": torch.randn(2, 8, 32)})
    ZOO["lumina2"] = (_diffusers("Lumina2Transformer2DModel", sample_size=8, patch_size=2, in_channels=4,
                                 hidden_size=64, num_layers=2, num_refiner_layers=1, num_attention_heads=4,
                                 num_kv_heads=2, multiple_of=16, cap_feat_dim=32, axes_dim_rope=(4, 6, 6),
                                 axes_lens=(64, 16, 16)),
                      lambda: {"hidden_states": torch.randn(2, 4, 8, 8), "timestep": torch.tensor([0.1, 0.9]),
                               "encoder_hidden_states": torch.randn(2, 8, 32),
                               "encoder_attention_mask": torch.ones(2, 8, dtype=torch.bool)})
    ZOO["auraflow"] = (_diffusers("AuraFlowTransformer2DModel", sample_size=8, patch_size=2, in_channels=4,
                                  num_mmdit_layers=1, num_single_dit_layers=1, attention_head_dim=16,
                                  num_attention_heads=2, joint_attention_dim=32, caption_projection_dim=32,
                                  out_channels=4, pos_embed_max_size=64),
                       lambda: {"hidden_states": torch.randn(2, 4, 8, 8), "timestep": _T(),
                                "encoder_hidden_states": torch.randn(2, 8, 32)})
    ZOO["sana"] = (_diffusers("SanaTransformer2DModel", in_channels=4, out_channels=4, num_attention_heads=2,
                              attention_head_dim=16, num_layers=2, num_cross_attention_heads=2,
                              cross_attention_head_dim=16, cross_attention_dim=32, caption_channels=32,
                              sample_size=8, patch_size=1, norm_elementwise_affine=False),
                   lambda: {"hidden_states": torch.randn(2, 4, 8, 8), "timestep": _T(),
                            "encoder_hidden_states": torch.randn(2, 8, 32)})
    ZOO["cogvideox"] = (_diffusers("CogVideoXTransformer3DModel", num_attention_heads=2, attention_head_dim=16,
                                   in_channels=4, out_channels=4, time_embed_dim=32, text_embed_dim=32,
                                   num_layers=2, sample_width=8, sample_height=8, sample_frames=5,
                                   patch_size=2, temporal_compression_ratio=4, max_text_seq_length=8,
                                   use_rotary_positional_embeddings=True),
                        lambda: {"hidden_states": torch.randn(2, 2, 4, 8, 8),
                                 "encoder_hidden_states": torch.randn(2, 8, 32), "timestep": _T().long()})


# one explicit name per entry, so that `--entry get_NAME` finds it in the file's text
get_cohere = ZOO["cohere"][0]
inputs_cohere = ZOO["cohere"][1]
get_glm4 = ZOO["glm4"][0]
inputs_glm4 = ZOO["glm4"][1]
get_nemotron = ZOO["nemotron"][0]
inputs_nemotron = ZOO["nemotron"][1]
get_olmo2 = ZOO["olmo2"][0]
inputs_olmo2 = ZOO["olmo2"][1]
get_gemma3 = ZOO["gemma3"][0]
inputs_gemma3 = ZOO["gemma3"][1]
get_helium = ZOO["helium"][0]
inputs_helium = ZOO["helium"][1]
get_lfm2 = ZOO["lfm2"][0]
inputs_lfm2 = ZOO["lfm2"][1]
get_qwen3_moe = ZOO["qwen3_moe"][0]
inputs_qwen3_moe = ZOO["qwen3_moe"][1]
get_granitemoe = ZOO["granitemoe"][0]
inputs_granitemoe = ZOO["granitemoe"][1]
get_phimoe = ZOO["phimoe"][0]
inputs_phimoe = ZOO["phimoe"][1]
get_dbrx = ZOO["dbrx"][0]
inputs_dbrx = ZOO["dbrx"][1]
get_gpt_oss = ZOO["gpt_oss"][0]
inputs_gpt_oss = ZOO["gpt_oss"][1]
get_deepseek_v3 = ZOO["deepseek_v3"][0]
inputs_deepseek_v3 = ZOO["deepseek_v3"][1]
get_jamba = ZOO["jamba"][0]
inputs_jamba = ZOO["jamba"][1]
get_bamba = ZOO["bamba"][0]
inputs_bamba = ZOO["bamba"][1]
get_mamba2 = ZOO["mamba2"][0]
inputs_mamba2 = ZOO["mamba2"][1]
get_falcon_mamba = ZOO["falcon_mamba"][0]
inputs_falcon_mamba = ZOO["falcon_mamba"][1]
get_recurrent_gemma = ZOO["recurrent_gemma"][0]
inputs_recurrent_gemma = ZOO["recurrent_gemma"][1]
get_hiera = ZOO["hiera"][0]
inputs_hiera = ZOO["hiera"][1]
get_pvt_v2 = ZOO["pvt_v2"][0]
inputs_pvt_v2 = ZOO["pvt_v2"][1]
get_vitdet = ZOO["vitdet"][0]
inputs_vitdet = ZOO["vitdet"][1]
get_bit = ZOO["bit"][0]
inputs_bit = ZOO["bit"][1]
get_swinv2 = ZOO["swinv2"][0]
inputs_swinv2 = ZOO["swinv2"][1]
get_mobilevitv2 = ZOO["mobilevitv2"][0]
inputs_mobilevitv2 = ZOO["mobilevitv2"][1]
get_dpt = ZOO["dpt"][0]
inputs_dpt = ZOO["dpt"][1]
get_hubert = ZOO["hubert"][0]
inputs_hubert = ZOO["hubert"][1]
get_wavlm = ZOO["wavlm"][0]
inputs_wavlm = ZOO["wavlm"][1]
get_moonshine = ZOO["moonshine"][0]
inputs_moonshine = ZOO["moonshine"][1]
get_owlvit = ZOO["owlvit"][0]
inputs_owlvit = ZOO["owlvit"][1]
get_siglip = ZOO["siglip"][0]
inputs_siglip = ZOO["siglip"][1]
get_rt_detr = ZOO["rt_detr"][0]
inputs_rt_detr = ZOO["rt_detr"][1]
get_conditional_detr = ZOO["conditional_detr"][0]
inputs_conditional_detr = ZOO["conditional_detr"][1]
get_deformable_detr = ZOO["deformable_detr"][0]
inputs_deformable_detr = ZOO["deformable_detr"][1]

if diffusers is not None:
    get_wan = ZOO["wan"][0]
    inputs_wan = ZOO["wan"][1]
    get_lumina2 = ZOO["lumina2"][0]
    inputs_lumina2 = ZOO["lumina2"][1]
    get_auraflow = ZOO["auraflow"][0]
    inputs_auraflow = ZOO["auraflow"][1]
    get_sana = ZOO["sana"][0]
    inputs_sana = ZOO["sana"][1]
    get_cogvideox = ZOO["cogvideox"][0]
    inputs_cogvideox = ZOO["cogvideox"][1]
