"""Fixed twin of ``qwen_stop_words.py``: the next-token scores are processed in fp32, as
https://github.com/facebookresearch/metaseq/pull/247 does and transformers' ``generate``
does now (``outputs.logits[:, -1].to(copy=True, dtype=torch.float32)``).
"""
import torch
from torch import nn

VOCAB, D = 256, 64
EOS, STOP_WORDS = 255, [[254], [253]]  # <|endoftext|>, <|im_end|>, <|im_start|> stand-ins
TEMPERATURE = 0.3
SCORES_IN_FP32 = True  # the upstream fix


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
