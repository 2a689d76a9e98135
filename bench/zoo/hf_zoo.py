"""A zoo of tiny real architectures built from transformers configs (random weights, no hub).

Each ``get_NAME`` builds one model; ``inputs_NAME`` gives its example inputs (language models:
their real vocabulary, a padded attention mask). Scan one with
``precisionaudit scan bench/zoo/hf_zoo.py --entry get_gpt2 --inputs inputs_gpt2``;
``bench/zoo_bench.py`` scans them all.
"""
import torch
import transformers as tf

SEQ = 16


def _lm_inputs(vocab, labels=False):
    def make():
        ids = torch.randint(0, vocab, (2, SEQ))
        mask = torch.ones_like(ids)
        mask[1, SEQ - 4:] = 0  # a padded row, so the attention mask is not all ones
        out = {"input_ids": ids, "attention_mask": mask}
        if labels:
            out["labels"] = ids
        return out
    return make


def _image_inputs(size=32, channels=3):
    return lambda: {"pixel_values": torch.randn(2, channels, size, size)}


#: name → (config class, config kwargs, model class, inputs factory)
SMALL = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
ZOO = {
    "gpt2": (tf.GPT2Config, dict(n_layer=2, n_embd=64, n_head=4, n_positions=128, vocab_size=50257),
             tf.GPT2LMHeadModel, _lm_inputs(50257, labels=True)),
    "gpt2_eager": (tf.GPT2Config, dict(n_layer=2, n_embd=64, n_head=4, n_positions=128,
                                       vocab_size=50257, attn_implementation="eager"),
                   tf.GPT2LMHeadModel, _lm_inputs(50257)),
    "bert": (tf.BertConfig, dict(SMALL, max_position_embeddings=128, vocab_size=30522),
             tf.BertForMaskedLM, _lm_inputs(30522, labels=True)),
    "bert_eager": (tf.BertConfig, dict(SMALL, max_position_embeddings=128, vocab_size=30522,
                                       attn_implementation="eager"),
                   tf.BertForMaskedLM, _lm_inputs(30522)),
    "roberta": (tf.RobertaConfig, dict(SMALL, max_position_embeddings=130, vocab_size=50265),
                tf.RobertaForMaskedLM, _lm_inputs(50265)),
    "llama": (tf.LlamaConfig, dict(SMALL, num_key_value_heads=2, max_position_embeddings=128,
                                   vocab_size=32000),
              tf.LlamaForCausalLM, _lm_inputs(32000, labels=True)),
    "llama_eager": (tf.LlamaConfig, dict(SMALL, num_key_value_heads=2, max_position_embeddings=128,
                                         vocab_size=32000, attn_implementation="eager"),
                    tf.LlamaForCausalLM, _lm_inputs(32000)),
    "mistral": (tf.MistralConfig, dict(SMALL, num_key_value_heads=2, vocab_size=32000),
                tf.MistralForCausalLM, _lm_inputs(32000)),
    "qwen2": (tf.Qwen2Config, dict(SMALL, num_key_value_heads=2, vocab_size=151936),
              tf.Qwen2ForCausalLM, _lm_inputs(151936)),
    "gpt_neox": (tf.GPTNeoXConfig, dict(SMALL, vocab_size=50304), tf.GPTNeoXForCausalLM,
                 _lm_inputs(50304)),
    "opt": (tf.OPTConfig, dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                               ffn_dim=128, word_embed_proj_dim=64, vocab_size=50272),
            tf.OPTForCausalLM, _lm_inputs(50272)),
    "bloom": (tf.BloomConfig, dict(n_layer=2, hidden_size=64, n_head=4, vocab_size=250880),
              tf.BloomForCausalLM, _lm_inputs(250880)),
    "t5": (tf.T5Config, dict(num_layers=2, num_decoder_layers=2, d_model=64, d_kv=16, num_heads=4,
                             d_ff=128, vocab_size=32128, decoder_start_token_id=0),
           tf.T5ForConditionalGeneration, _lm_inputs(32128, labels=True)),
    "vit": (tf.ViTConfig, dict(SMALL, image_size=32, patch_size=8), tf.ViTForImageClassification,
            _image_inputs()),
    "convnext": (tf.ConvNextConfig, dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]),
                 tf.ConvNextForImageClassification, _image_inputs()),
    "resnet": (tf.ResNetConfig, dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                     embedding_size=16),
               tf.ResNetForImageClassification, _image_inputs()),
}


def _builder(config_cls, kwargs, model_cls):
    def build():
        torch.manual_seed(0)
        config = config_cls(**kwargs)
        if hasattr(config, "use_cache"):
            config.use_cache = False
        return model_cls(config).eval()
    return build


# one explicit name per entry, so that `--entry get_NAME` finds it in the file's text
get_gpt2 = _builder(*ZOO["gpt2"][:3])
inputs_gpt2 = ZOO["gpt2"][3]
get_gpt2_eager = _builder(*ZOO["gpt2_eager"][:3])
inputs_gpt2_eager = ZOO["gpt2_eager"][3]
get_bert = _builder(*ZOO["bert"][:3])
inputs_bert = ZOO["bert"][3]
get_bert_eager = _builder(*ZOO["bert_eager"][:3])
inputs_bert_eager = ZOO["bert_eager"][3]
get_roberta = _builder(*ZOO["roberta"][:3])
inputs_roberta = ZOO["roberta"][3]
get_llama = _builder(*ZOO["llama"][:3])
inputs_llama = ZOO["llama"][3]
get_llama_eager = _builder(*ZOO["llama_eager"][:3])
inputs_llama_eager = ZOO["llama_eager"][3]
get_mistral = _builder(*ZOO["mistral"][:3])
inputs_mistral = ZOO["mistral"][3]
get_qwen2 = _builder(*ZOO["qwen2"][:3])
inputs_qwen2 = ZOO["qwen2"][3]
get_gpt_neox = _builder(*ZOO["gpt_neox"][:3])
inputs_gpt_neox = ZOO["gpt_neox"][3]
get_opt = _builder(*ZOO["opt"][:3])
inputs_opt = ZOO["opt"][3]
get_bloom = _builder(*ZOO["bloom"][:3])
inputs_bloom = ZOO["bloom"][3]
get_t5 = _builder(*ZOO["t5"][:3])
inputs_t5 = ZOO["t5"][3]
get_vit = _builder(*ZOO["vit"][:3])
inputs_vit = ZOO["vit"][3]
get_convnext = _builder(*ZOO["convnext"][:3])
inputs_convnext = ZOO["convnext"][3]
get_resnet = _builder(*ZOO["resnet"][:3])
inputs_resnet = ZOO["resnet"][3]
