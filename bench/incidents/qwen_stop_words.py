"""Qwen's stop-word logits processor on fp16 logits: 2**15 divided by the temperature is inf.

Code: Qwen's ``qwen_generation_utils.StopWordsLogitsProcessor`` (shipped with Qwen-7B/14B-Chat
and used by their ``chat()``/``generate()``) writes ``scores[i, eos_token_id] = float(2**15)``
into the next-token scores of every sample that ended with a stop word. Under fp16
(``fp16=True``, V100s without bf16) the scores are the lm_head's fp16 logits, and the
sampling warpers run on them: ``TemperatureLogitsWarper`` divides by the temperature, so any
temperature below 0.5 makes 32768 / T larger than 65504: inf, and the softmax before
``torch.multinomial`` turns the row into NaN. That overflow at a low temperature is
documented in https://github.com/facebookresearch/metaseq/pull/247 ("Keep logits in fp32
... fixing a known bug where using temperature 0.1 causes overflow issues"); fp16 Qwen users
report the sampler's "probability tensor contains either inf, nan or element < 0"
(https://github.com/QwenLM/Qwen/issues/815, #848), whose causes those threads do not
establish: this reproduction is Qwen's code under that documented mechanism (issue 36's
"Qwen-style stop-word mask"), not a reproduction of those threads.
Upstream fix: the next-token scores are processed in fp32 (metaseq#247; transformers'
``generate`` now takes ``outputs.logits[:, -1].to(copy=True, dtype=torch.float32)``;
fixed twin: ``qwen_stop_words_fixed.py``).
Target: float16 pure (``AutoModelForCausalLM.from_pretrained(..., fp16=True)``).
"""
import torch
from torch import nn

VOCAB, D = 256, 64
EOS, STOP_WORDS = 255, [[254], [253]]  # <|endoftext|>, <|im_end|>, <|im_start|> stand-ins
TEMPERATURE = 0.3
SCORES_IN_FP32 = False


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return output.type_as(x) * self.weight


class StopWordsLogitsProcessor:
    """Qwen's: a sample whose last tokens are a stop word gets eos at 2**15."""

    def __init__(self, stop_words_ids, eos_token_id):
        self.stop_words_ids, self.eos_token_id = stop_words_ids, eos_token_id

    def __call__(self, input_ids, scores):
        stopped_samples = self._calc_stopped_samples(input_ids)
        for i, should_stop in enumerate(stopped_samples):
            if should_stop:
                scores[i, self.eos_token_id] = float(2**15)
        return scores

    def _tokens_match(self, prev_tokens, tokens):
        return len(tokens) <= len(prev_tokens) and prev_tokens[-len(tokens):].tolist() == tokens

    def _calc_stopped_samples(self, prev_input_ids):
        return [any(self._tokens_match(row, seq) for seq in self.stop_words_ids) for row in prev_input_ids]


class QWenLMHeadModel(nn.Module):
    """One decoding step as ``generate`` runs it: the model's next-token logits, the logits
    processors and warpers, the sampling probabilities."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D)
        self.ln_f = RMSNorm(D)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)
        self.stop_words = StopWordsLogitsProcessor(STOP_WORDS, EOS)

    def forward(self, input_ids):
        logits = self.lm_head(self.ln_f(self.wte(input_ids)))
        scores = logits[:, -1, :].float() if SCORES_IN_FP32 else logits[:, -1, :].clone()
        scores = self.stop_words(input_ids, scores)
        scores = scores / TEMPERATURE  # TemperatureLogitsWarper
        return torch.softmax(scores, dim=-1)


def get_model():
    torch.manual_seed(0)
    return QWenLMHeadModel()


def get_example_inputs():
    """Four samples; the second ended with <|im_end|>."""
    torch.manual_seed(0)
    ids = torch.randint(0, 200, (4, 12))
    ids[1, -1] = STOP_WORDS[0][0]
    return (ids,)
