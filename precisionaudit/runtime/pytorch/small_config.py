"""A small build of a Hugging Face config: the same architecture and the same code paths, at a
size whose real weights fit in memory.

When a forward fails on fake tensors and the model is too large to run eagerly (a default
config is the family's real size: billions of parameters), a real run of the small build says
whose error it is (capture's ``_after_fake_failure``). Only counts and widths that select no
code path are shrunk: feed-forward widths; vocabularies, to SMALL_VOCAB entries (the token ids
the config names kept inside); expert counts (at least twice the experts a token picks and
two per routing group); and layer counts, kept long enough to hold every kind of layer the
config names (per-layer lists are cut to it; layer-index lists and per-layer dicts keep the
indices below it, one at least; a period, offset or "first k dense" count stays inside it; a
count naming every layer, as "every layer shares its KV cache", still does), and different where
they differed (a decoder deeper than its encoder). Attention widths stay as they are (heads
and rotary sections depend on them). The config is made again from its dict, so its own
validation runs.
"""
from __future__ import annotations

#: counts of layers (decoders, encoders) a config may name
LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers", "encoder_layers",
                "num_decoder_layers", "num_encoder_layers")
#: expert counts, the experts a token picks, and routing groups
EXPERTS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
PICKED = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_top_k", "moe_k", "top_k")
GROUPS = ("n_group", "num_expert_group")
#: feed-forward widths: the hidden size of an MLP selects no code path
FFN_WIDTHS = ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
              "shared_intermediate_size", "shared_experts_intermediate_size", "ffn_dim", "encoder_ffn_dim",
              "decoder_ffn_dim", "d_ff", "ffn_hidden_size", "expert_ffn_hidden_size", "dense_intermediate_size",
              "moe_shared_expert_intermediate_size", "intermediate_size_mlp")
#: layer-pattern numbers the kept layers must reach past (a layer of each kind is kept)
PATTERN_WORDS = ("period", "offset", "replace", "interval", "every_n", "pattern", "step", "start")
SMALL_WIDTH, SMALL_VOCAB, LEAST_LAYERS = 128, 512, 2


def small_config(config):
    """A copy of ``config`` shrunk as the module doc says, or None when it cannot be made."""
    try:
        return type(config).from_dict(_shrink(config.to_dict()))
    except Exception:  # noqa: BLE001 - a config that refuses the change has no small build
        return None


def _shrink(values: dict) -> dict:
    values = {k: _shrink(v) if isinstance(v, dict) and "model_type" in v else v for k, v in values.items()}
    for key in FFN_WIDTHS:
        if _count(values.get(key)):
            values[key] = min(values[key], SMALL_WIDTH)
    _shrink_vocabularies(values)
    picked = max([values[k] for k in PICKED if _count(values.get(k))] + [1])
    groups = max([values[k] for k in GROUPS if _count(values.get(k))] + [1])
    for key in EXPERTS:
        if _count(values.get(key)):
            values[key] = min(values[key], max(2 * picked, 2 * groups, 4))
    counts = sorted((values[k], k) for k in LAYER_COUNTS if _count(values.get(k)))
    kept = {}
    for count, key in counts:  # counts that differ stay different (a decoder deeper than its encoder)
        below = [kept[k] for c, k in counts if c < count and k in kept]
        kept[key] = min(count, max([_layers_to_keep(values, key)] + [k + 1 for k in below]))
    for key, keep in kept.items():
        _cut_layers(values, key, keep)
    return values


def _shrink_vocabularies(values: dict) -> None:
    """Vocabularies (and hash-embedding tables) made SMALL_VOCAB entries at most, the token
    ids the config names kept inside."""
    for key, value in list(values.items()):
        if _count(value) and key.endswith(("vocab_size", "_vocab")) \
                and not any(word in key for word in ("offset", "divisible")):
            values[key] = min(value, SMALL_VOCAB)
    vocab = values.get("vocab_size")
    if _count(vocab):
        for key, value in list(values.items()):
            if key.endswith(("_token_id", "_token_index")) and _count(value) and value >= vocab:
                values[key] = vocab - 1


def _layers_to_keep(values: dict, key: str) -> int:
    """How many of the ``key`` layers to keep: every kind of layer the config names."""
    count = values[key]
    keep = LEAST_LAYERS
    for k in _per_layer_lists(values, count):  # a prefix holding every kind of layer the list names
        kinds = {repr(x) for x in values[k]}
        keep = max(keep, next(i + 1 for i in range(count) if {repr(x) for x in values[k][:i + 1]} == kinds))
    for k in _layer_indices(values, count):
        keep = max(keep, min(values[k]) + 1)
    for k in _per_layer_dicts(values, count):  # a layer the dict overrides stays
        keep = max(keep, min(int(i) for i in values[k]) + 1)
    for k, v in values.items():
        if _count(v) and any(word in k for word in PATTERN_WORDS) and k not in LAYER_COUNTS:
            keep = max(keep, v + 1)
    return min(keep, count)


def _cut_layers(values: dict, key: str, keep: int) -> None:
    """The layer count ``key`` made ``keep``, and the lists describing its layers cut to it."""
    count = values[key]
    for k in _layer_indices(values, count):
        values[k] = [i for i in values[k] if i < keep]
    for k in _per_layer_lists(values, count):
        values[k] = values[k][:keep]
    for k in _per_layer_dicts(values, count):
        values[k] = {i: v for i, v in values[k].items() if int(i) < keep}
    for k in _all_layers_counts(values, key):
        values[k] = keep
    values[key] = keep


def _per_layer_lists(values: dict, count: int) -> list[str]:
    return [k for k, v in values.items() if isinstance(v, list) and len(v) == count]


def _layer_indices(values: dict, count: int) -> list[str]:
    return [k for k, v in values.items() if "layer" in k and isinstance(v, list) and v and len(v) != count
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < count for i in v)]


def _per_layer_dicts(values: dict, count: int) -> list[str]:
    """Dicts keyed by layer index (``per_layer_config``: heterogeneous layers)."""
    return [k for k, v in values.items() if "layer" in k and isinstance(v, dict) and v
            and all(str(i).isdigit() and int(i) < count for i in v)]


def _all_layers_counts(values: dict, key: str) -> list[str]:
    """Other counts of layers that name every layer (Gemma 4 assistant's ``num_kv_shared_layers``,
    Qwen2's ``max_window_layers``): cut with them, they still do."""
    return [k for k, v in values.items() if k != key and k not in LAYER_COUNTS and "layers" in k
            and _count(v) and v == values[key]]


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
