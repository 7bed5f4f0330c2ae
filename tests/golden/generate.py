#!/usr/bin/env python3
"""Generate golden reference fixtures for the `posenc` crate's tests.

Every value is computed by the *reference* implementation, imported from
Hugging Face `transformers` and `x-transformers` (and `torch`); nothing that they provide
is re-implemented here.  The only hand-written reference is Transformer-XL's
`_rel_shift`, which transformers no longer ships (see `xl_rel_shift` below).

Usage, from the repository root, in an environment made from
tests/golden/requirements.txt (see tests/golden/README.md):

    python tests/golden/generate.py [FIXTURE.json ...]

The script rewrites these files in tests/golden/, or only the ones named
(deterministically: running it twice with the same package versions produces
byte-identical files):

    t5_buckets.json, deberta_buckets.json, alibi_slopes.json, rope.json,
    xl_rel_shift.json, rope_yarn_grid.json, rope_configs.json (and configs/v5/*.json),
    rope_ntk_by_parts.json, dpb.json, rope_partial.json, rope_proportional.json,
    rope_nope_layers.json, dd_alibi.json, cope.json

Floating-point values are float32 tensor elements converted with float(), so
each JSON number is the exact decimal expansion (shortest repr of the double)
of an f32 value: parse it as f64 and cast to f32 to recover the bits exactly.
The Rust tests only read the JSON; they never run Python.
"""

import copy
import glob
import importlib
import json
import math
import os
import platform
import sys

import torch
import transformers
from transformers import CONFIG_MAPPING, LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.deberta_v2.modeling_deberta_v2 import (
    build_relative_position,
    make_log_bucket_position,
)
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.t5.modeling_t5 import T5Attention

OUT_DIR = os.path.dirname(os.path.abspath(__file__))

GENERATOR = {
    "transformers": transformers.__version__,
    "torch": torch.__version__,
    "python": platform.python_version(),
}


# --------------------------------------------------------------------------
# Output helpers
# --------------------------------------------------------------------------


def f32_list(t):
    """A float32 tensor (any shape) as nested lists of exactly-representable floats."""
    if t.dtype != torch.float32:
        raise TypeError(f"expected float32, got {t.dtype}")
    return [f32_list(x) for x in t] if t.dim() > 1 else [float(x) for x in t.tolist()]


def int_list(t):
    if t.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"expected an integer tensor, got {t.dtype}")
    return t.tolist()


def _dump(value):
    return json.dumps(value, separators=(", ", ": "), allow_nan=False)


def write_fixture(name, doc):
    """Write `doc` as JSON: one top-level key per line, one list element (case) per line."""
    lines = ["{"]
    items = list(doc.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i + 1 < len(items) else ""
        if isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"  {json.dumps(key)}: [")
            for j, elem in enumerate(value):
                elem_comma = "," if j + 1 < len(value) else ""
                lines.append(f"    {_dump(elem)}{elem_comma}")
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {_dump(value)}{comma}")
    lines.append("}")
    path = os.path.join(OUT_DIR, name)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    # Sanity: the file must be valid JSON that round-trips to the same document.
    with open(path, encoding="utf-8") as f:
        if json.load(f) != json.loads(json.dumps(doc)):
            raise AssertionError(f"{name}: JSON round-trip mismatch")
    print(f"wrote {path}")


# --------------------------------------------------------------------------
# 1. T5 relative position buckets
# --------------------------------------------------------------------------


def t5_buckets():
    rel = torch.arange(-300, 301, dtype=torch.long)
    cases = []
    for num_buckets, max_distance in [(32, 128), (16, 64), (64, 256)]:
        for bidirectional in [True, False]:
            bucket = T5Attention._relative_position_bucket(
                rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
            )
            cases.append(
                {
                    "num_buckets": num_buckets,
                    "max_distance": max_distance,
                    "bidirectional": bidirectional,
                    "relative_position": rel.tolist(),
                    "bucket": int_list(bucket),
                }
            )
    write_fixture(
        "t5_buckets.json",
        {
            "generator": GENERATOR,
            "reference": "transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket",
            # T5Attention.compute_bias: relative_position = memory_position - context_position
            "convention": "relative_position = key_position - query_position",
            "cases": cases,
        },
    )


# --------------------------------------------------------------------------
# 2. DeBERTa-v2 log buckets and relative position matrices
# --------------------------------------------------------------------------


def deberta_buckets():
    rel = torch.arange(-1100, 1101, dtype=torch.long)
    cases = []
    for bucket_size, max_position in [(256, 512), (64, 128)]:
        # make_log_bucket_position returns a float tensor; the model converts it
        # with .to(torch.long) (see build_relative_position), and so do we.
        bucket = make_log_bucket_position(rel, bucket_size, max_position).to(torch.long)
        cases.append(
            {
                "bucket_size": bucket_size,
                "max_position": max_position,
                "relative_position": rel.tolist(),
                "bucket": int_list(bucket),
            }
        )

    matrices = []
    for query_size, key_size, bucket_size, max_position in [(5, 7, 4, 8), (6, 6, -1, -1)]:
        # build_relative_position only reads .size(-2) and .device of its tensor
        # arguments, so zero tensors of shape (size, 1) stand in for query/key layers.
        query_layer = torch.zeros(query_size, 1)
        key_layer = torch.zeros(key_size, 1)
        m = build_relative_position(query_layer, key_layer, bucket_size=bucket_size, max_position=max_position)
        if tuple(m.shape) != (1, query_size, key_size):
            raise AssertionError(f"unexpected shape {tuple(m.shape)}")
        matrices.append(
            {
                "query_size": query_size,
                "key_size": key_size,
                "bucket_size": bucket_size,
                "max_position": max_position,
                "matrix": int_list(m[0]),
            }
        )

    write_fixture(
        "deberta_buckets.json",
        {
            "generator": GENERATOR,
            "reference": "transformers.models.deberta_v2.modeling_deberta_v2."
            "make_log_bucket_position(...).to(torch.long) and build_relative_position",
            "convention": "relative_position = query_position - key_position",
            "cases": cases,
            "relative_position_matrices": matrices,
        },
    )


# --------------------------------------------------------------------------
# 3. ALiBi slopes (Bloom)
# --------------------------------------------------------------------------


def bloom_alibi(num_heads, seq_len):
    """Bloom's alibi for batch 1 and an all-ones mask: float32 tensor (num_heads, seq_len)."""
    mask = torch.ones(1, seq_len, dtype=torch.long)
    alibi = build_alibi_tensor(mask, num_heads, torch.float32)  # (num_heads, 1, seq_len)
    return alibi.reshape(num_heads, seq_len)


def alibi_slopes():
    cases = []
    for heads in [1, 2, 3, 6, 8, 12, 20, 40]:
        alibi = bloom_alibi(heads, 8)
        # With an all-ones mask, Bloom's alibi is slope * key_position (key
        # positions 0..seq_len-1, from cumsum(mask) - 1), so the column at key
        # position 1 is exactly slope * 1 = slope (float32, no rounding).
        slopes = alibi[:, 1]
        # Every column must be slope * position in float32 (checks the reading above).
        positions = torch.arange(8, dtype=torch.float32)
        if not torch.equal(alibi, slopes[:, None] * positions[None, :]):
            raise AssertionError("alibi is not slope * key_position")
        cases.append({"heads": heads, "slopes": f32_list(slopes)})

    rows = []
    for heads in [12, 6]:
        alibi = bloom_alibi(heads, 8)
        rows.append({"heads": heads, "key_positions": list(range(8)), "alibi": f32_list(alibi)})

    write_fixture(
        "alibi_slopes.json",
        {
            "generator": GENERATOR,
            "reference": "transformers.models.bloom.modeling_bloom.build_alibi_tensor"
            "(torch.ones(1, 8, dtype=torch.long), heads, torch.float32)",
            "slopes_from": "alibi value at key position 1 (= slope * 1), per head",
            "cases": cases,
            "bloom_alibi": rows,
        },
    )


# --------------------------------------------------------------------------
# 4. RoPE inverse frequencies
# --------------------------------------------------------------------------

NUM_HEADS = 4  # arbitrary; head_dim is set explicitly, hidden_size = head_dim * NUM_HEADS


def rope_case(name, rope_type, dim, base, max_position_embeddings, params, seq_len=None):
    """Build a LlamaConfig exactly from (rope_type, base, dim, max_position_embeddings, params)
    and call the transformers RoPE init function for `rope_type`."""
    rope_parameters = {"rope_type": rope_type, "rope_theta": base, **copy.deepcopy(params)}
    config = LlamaConfig(
        hidden_size=dim * NUM_HEADS,
        num_attention_heads=NUM_HEADS,
        head_dim=dim,
        max_position_embeddings=max_position_embeddings,
        rope_parameters=rope_parameters,
    )
    if rope_type == "default":
        # transformers 5 has no "default" entry in ROPE_INIT_FUNCTIONS: each model's
        # RotaryEmbedding computes it in its compute_default_rope_parameters.
        fn = LlamaRotaryEmbedding.compute_default_rope_parameters
        fn_name = "transformers.models.llama.modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters"
        inv_freq, attention_factor = fn(config, device=None, seq_len=seq_len)
    else:
        fn = ROPE_INIT_FUNCTIONS[rope_type]
        fn_name = f"transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS[{rope_type!r}] ({fn.__name__})"
        inv_freq, attention_factor = fn(config, None, seq_len=seq_len)
    if inv_freq.shape != (dim // 2,):
        raise AssertionError(f"{name}: unexpected inv_freq shape {tuple(inv_freq.shape)}")

    case = {
        "name": name,
        "rope_type": rope_type,
        "dim": dim,
        "base": float(base),
        "max_position_embeddings": max_position_embeddings,
        "params": params,
        "seq_len": seq_len,
        "reference": fn_name,
        # config.rope_parameters after transformers' standardize_rope_params(), i.e.
        # exactly the dict the init function read (for documentation / debugging).
        "hf_rope_parameters": dict(config.rope_parameters),
    }
    if rope_type == "yarn":
        # transformers 5.x: _compute_yarn_parameters uses rope_parameters["factor"] as
        # given, and only when it is None falls back to
        # max_position_embeddings / original_max_position_embeddings.
        f = config.rope_parameters["factor"]
        if f is None:
            f = config.max_position_embeddings / config.rope_parameters["original_max_position_embeddings"]
        case["effective_factor"] = float(f)
    if rope_type == "dynamic":
        # _compute_dynamic_ntk_parameters: seq_len None -> max_position_embeddings,
        # otherwise max(seq_len, max_position_embeddings).
        case["effective_seq_len"] = max(seq_len or 0, max_position_embeddings)
    case["inv_freq"] = f32_list(inv_freq)
    case["attention_factor"] = float(attention_factor)
    return case


def rope():
    cases = [
        # default
        rope_case("default_d64_b1e4", "default", 64, 10000.0, 2048, {}),
        rope_case("default_d128_b5e5", "default", 128, 500000.0, 8192, {}),
        rope_case("default_d8_b1e4", "default", 8, 10000.0, 2048, {}),
        # linear (position interpolation)
        rope_case("linear_f2", "linear", 64, 10000.0, 2048, {"factor": 2.0}),
        rope_case("linear_f4", "linear", 64, 10000.0, 2048, {"factor": 4.0}),
    ]
    # dynamic NTK
    for seq_len in [None, 1024, 2048, 3000, 4096, 8192]:
        cases.append(
            rope_case(
                f"dynamic_f2_seq{seq_len if seq_len is not None else 'none'}",
                "dynamic",
                64,
                10000.0,
                2048,
                {"factor": 2.0},
                seq_len=seq_len,
            )
        )
    # YaRN
    cases += [
        rope_case(
            "yarn_a_f4_defaults",
            "yarn",
            64,
            10000.0,
            8192,
            {"factor": 4.0, "original_max_position_embeddings": 2048},
        ),
        rope_case(
            "yarn_b_f4_beta16_2",
            "yarn",
            64,
            10000.0,
            8192,
            {"factor": 4.0, "original_max_position_embeddings": 2048, "beta_fast": 16, "beta_slow": 2},
        ),
        rope_case(
            "yarn_c_f8_mscale1_1_deepseek",
            "yarn",
            64,
            10000.0,
            32768,
            {
                "factor": 8.0,
                "original_max_position_embeddings": 4096,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
            },
        ),
        rope_case(
            "yarn_c2_f40_mscale1_0707",
            "yarn",
            64,
            10000.0,
            163840,
            {
                "factor": 40.0,
                "original_max_position_embeddings": 4096,
                "mscale": 1.0,
                "mscale_all_dim": 0.707,
                "beta_fast": 32,
                "beta_slow": 1,
            },
        ),
        rope_case(
            "yarn_d_f4_attention_factor_1.5",
            "yarn",
            64,
            10000.0,
            8192,
            {"factor": 4.0, "original_max_position_embeddings": 2048, "attention_factor": 1.5},
        ),
        rope_case(
            "yarn_e_f4_truncate_false",
            "yarn",
            64,
            10000.0,
            8192,
            {"factor": 4.0, "original_max_position_embeddings": 2048, "truncate": False},
        ),
        # factor mismatching max_position_embeddings / original: the explicit factor wins.
        rope_case(
            "yarn_g_f4_max16384_explicit_factor_wins",
            "yarn",
            64,
            10000.0,
            16384,
            {"factor": 4.0, "original_max_position_embeddings": 2048},
        ),
        # factor None: transformers falls back to max_position_embeddings / original.
        rope_case(
            "yarn_h_factor_none_implicit_8",
            "yarn",
            64,
            10000.0,
            16384,
            {"factor": None, "original_max_position_embeddings": 2048},
        ),
        # Qwen2.5-style long context
        rope_case(
            "yarn_f_qwen_f4_d128_b1e6",
            "yarn",
            128,
            1000000.0,
            131072,
            {"factor": 4.0, "original_max_position_embeddings": 32768},
        ),
    ]
    # Llama 3.x
    cases += [
        rope_case(
            "llama3_1_f8_d128",
            "llama3",
            128,
            500000.0,
            131072,
            {
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        ),
        rope_case(
            "llama3_2_f32_d64",
            "llama3",
            64,
            500000.0,
            131072,
            {
                "factor": 32.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        ),
    ]
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        raise AssertionError("duplicate case names")
    write_fixture(
        "rope.json",
        {
            "generator": GENERATOR,
            "config": "transformers.LlamaConfig(hidden_size=dim*4, num_attention_heads=4, head_dim=dim, "
            "max_position_embeddings=max_position_embeddings, rope_parameters={'rope_type': rope_type, "
            "'rope_theta': base, **params}); partial_rotary_factor 1.0",
            "call": "ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len) (for 'default': "
            "LlamaRotaryEmbedding.compute_default_rope_parameters(config, seq_len=seq_len)); "
            "inv_freq has dim/2 float32 entries, attention_factor is a Python float",
            "cases": cases,
        },
    )


# --------------------------------------------------------------------------
# 5. Transformer-XL relative shift
# --------------------------------------------------------------------------


def xl_rel_shift(x):
    """2-D version of `_rel_shift` from kimiyoung/transformer-xl, pytorch/mem_transformer.py
    (RelMultiHeadAttn._rel_shift, zero_triu=False), which works on (qlen, klen, bsz, n_head);
    here x is (qlen, klen). Not part of transformers, hence written out here."""
    zero_pad = torch.zeros((x.size(0), 1), device=x.device, dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view(x.size(1) + 1, x.size(0))
    return x_padded[1:].view_as(x)


def xl_rel_shift_fixture():
    cases = []
    for qlen, klen in [(3, 5), (4, 4)]:
        i = torch.arange(qlen, dtype=torch.float32)[:, None]
        j = torch.arange(klen, dtype=torch.float32)[None, :]
        x = 10 * i + j + 1
        cases.append({"qlen": qlen, "klen": klen, "x": f32_list(x), "shifted": f32_list(xl_rel_shift(x))})
    write_fixture(
        "xl_rel_shift.json",
        {
            "generator": GENERATOR,
            "reference": "kimiyoung/transformer-xl pytorch/mem_transformer.py RelMultiHeadAttn._rel_shift "
            "(zero_triu=False), reduced to 2-D (qlen, klen): pad a zero column on the left of dim 1, "
            "view as (klen+1, qlen), drop the first row, view back as (qlen, klen)",
            "input": "x[i][j] = 10*i + j + 1 (float32)",
            "cases": cases,
        },
    )


# --------------------------------------------------------------------------
# 6. YaRN over a grid of head dimensions and original lengths
# --------------------------------------------------------------------------


def rope_yarn_grid():
    """YaRN with `truncate` true and false for head dimensions 32..256 and original lengths up
    to 131072, through the same `rope_case` as rope.json."""
    cases = []
    for dim in [32, 64, 128, 256]:
        for original in [2048, 4096, 32768, 131072]:
            for base in [10000.0, 1000000.0]:
                for truncate in [True, False]:
                    params = {"factor": 4.0, "original_max_position_embeddings": original, "truncate": truncate}
                    name = f"yarn_d{dim}_L{original}_b{int(base)}_{'trunc' if truncate else 'exact'}"
                    cases.append(rope_case(name, "yarn", dim, base, 4 * original, params))
    write_fixture(
        "rope_yarn_grid.json",
        {
            "generator": GENERATOR,
            "config": "as rope.json: LlamaConfig with head_dim=dim, max_position_embeddings=4*original, "
            "rope_parameters={'rope_type': 'yarn', 'rope_theta': base, 'factor': 4.0, "
            "'original_max_position_embeddings': original, 'truncate': truncate}",
            "call": "ROPE_INIT_FUNCTIONS['yarn'](config, None, seq_len=None)",
            "cases": cases,
        },
    )


# --------------------------------------------------------------------------
# 7. Real configuration blocks (tests/golden/configs/*.json)
# --------------------------------------------------------------------------
#
# Each file holds the RoPE part of a published config.json (plus the keys that size the head),
# written from the published configurations. Values not certain to the digit:
#   - phi-3.5-mini-instruct.json: the 48 short_factor and 48 long_factor values are recalled, not
#     copied; the real lists may differ in some digits (the reading and the golden values do not
#     depend on them being the published ones).
#   - gemma-3-4b-it.json: the published text_config leaves head_dim, num_attention_heads,
#     query_pre_attn_scalar, rope_theta, rope_local_base_freq and max_position_embeddings at the
#     class defaults; head_dim, num_attention_heads and query_pre_attn_scalar are written out here
#     (with the defaults' values), the others are left to the defaults as published.
#   - ministral-3-8b-instruct-2512.json: written from the Ministral 3 configuration as the
#     transformers class Ministral3Config describes it (factor 16, mscale = mscale_all_dim = 1,
#     original 16384, llama_4_scaling_beta 0.1); sizes (hidden 4096, 32 heads) may differ from the
#     8B checkpoint's.
#   - gpt-oss-20b.json, deepseek-v2-lite.json, deepseek-v3.json, llama-3.1-8b.json,
#     qwen2.5-7b-instruct-yarn.json (Qwen's documented YaRN block added to the Qwen2.5-7B-Instruct
#     config), pythia-160m.json, glm-4-9b-0414.json: as published, to our knowledge.

CONFIG_DIR = os.path.join(OUT_DIR, "configs")

# model type of the text model -> (modeling module, rotary embedding class, attention class)
MODEL_CLASSES = {
    "llama": ("llama", "LlamaRotaryEmbedding", "LlamaAttention"),
    "qwen2": ("qwen2", "Qwen2RotaryEmbedding", "Qwen2Attention"),
    "deepseek_v2": ("deepseek_v2", "DeepseekV2RotaryEmbedding", "DeepseekV2Attention"),
    "deepseek_v3": ("deepseek_v3", "DeepseekV3RotaryEmbedding", "DeepseekV3Attention"),
    "gpt_oss": ("gpt_oss", "GptOssRotaryEmbedding", "GptOssAttention"),
    "phi3": ("phi3", "Phi3RotaryEmbedding", "Phi3Attention"),
    "gemma3_text": ("gemma3", "Gemma3RotaryEmbedding", "Gemma3Attention"),
    "gpt_neox": ("gpt_neox", "GPTNeoXRotaryEmbedding", "GPTNeoXAttention"),
    "ministral3": ("ministral3", "Ministral3RotaryEmbedding", "Ministral3Attention"),
    "glm4": ("glm4", "Glm4RotaryEmbedding", "Glm4Attention"),
}

# keys of a v4 block that transformers 5 moves into `rope_parameters`
V4_ROPE_KEYS = {"rope_scaling", "rope_theta", "rotary_emb_base", "rotary_pct", "partial_rotary_factor", "rope_local_base_freq"}


def load_config(block):
    """The transformers config of a block: CONFIG_MAPPING[model_type](**rest), and its text config."""
    block = copy.deepcopy(block)
    config = CONFIG_MAPPING[block.pop("model_type")](**block)
    return config.get_text_config()


def qk_width(attention):
    """The width of q . k in the attention module: DeepSeek's qk_head_dim, else the head size."""
    for name in ("qk_head_dim", "head_dim", "head_size"):
        if hasattr(attention, name):
            return getattr(attention, name)
    raise AssertionError(f"no head width on {type(attention).__name__}")


def config_case(name, text, layer_type, seq_len):
    module, rotary_name, attention_name = MODEL_CLASSES[text.model_type]
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    rotary = getattr(modeling, rotary_name)(text)
    prefix = f"{layer_type}_" if layer_type else ""
    inv_freq = getattr(rotary, f"{prefix}inv_freq")
    attention_factor = getattr(rotary, f"{prefix}attention_scaling") if layer_type else rotary.attention_scaling
    rope_type = (text.rope_parameters[layer_type] if layer_type else text.rope_parameters)["rope_type"]
    if seq_len is not None:
        # what the dynamic update computes for a forward pass over seq_len positions
        fn = ROPE_INIT_FUNCTIONS[rope_type]
        kwargs = {"layer_type": layer_type} if layer_type else {}
        inv_freq, attention_factor = fn(text, None, seq_len=seq_len, **kwargs)
    # the softmax scale of the attention module, built on the meta device (no weights)
    layer_idx = text.layer_types.index(layer_type) if layer_type else 0
    with torch.device("meta"):
        attention = getattr(modeling, attention_name)(text, layer_idx)
    width = qk_width(attention)
    softmax_multiplier = attention.scaling * math.sqrt(width)
    case = {
        "name": name,
        "layer_type": layer_type,
        "seq_len": seq_len,
        "rope_type": rope_type,
        "rotary_dim": 2 * inv_freq.shape[0],
        "qk_width": width,
        "inv_freq": f32_list(inv_freq),
        "attention_factor": float(attention_factor),
        "softmax_multiplier": float(softmax_multiplier),
        "logit_multiplier": float(attention_factor) ** 2 * float(softmax_multiplier),
    }
    if text.model_type == "ministral3":
        positions = torch.tensor([[0, 1, 16383, 16384, 32767, 32768, 100000, 262143]])
        scale = modeling.get_llama_4_attn_scale(
            positions,
            text.rope_parameters.get("llama_4_scaling_beta"),
            text.rope_parameters.get("original_max_position_embeddings"),
        )
        case["temperature_positions"] = positions[0].tolist()
        case["temperature"] = f32_list(scale.reshape(-1).to(torch.float32))
    return case


def v5_form(block):
    """The block with its RoPE keys replaced by `rope_parameters` as transformers 5 standardizes them."""
    if "text_config" in block:
        return {**block, "text_config": v5_form(block["text_config"])}
    text = load_config(block)
    out = {k: v for k, v in block.items() if k not in V4_ROPE_KEYS and k != "rope_parameters"}
    out["rope_parameters"] = copy.deepcopy(text.to_dict()["rope_parameters"])
    return out


def rope_configs():
    os.makedirs(os.path.join(CONFIG_DIR, "v5"), exist_ok=True)
    cases = []
    for path in sorted(glob.glob(os.path.join(CONFIG_DIR, "*.json"))):
        name = os.path.splitext(os.path.basename(path))[0]
        with open(path, encoding="utf-8") as f:
            block = json.load(f)
        text = load_config(block)
        params = text.rope_parameters
        nested = [k for k in params if isinstance(params[k], dict)]
        for layer_type in sorted(nested) or [None]:
            p = params[layer_type] if layer_type else params
            cases.append(config_case(name, text, layer_type, None))
            if p["rope_type"] == "longrope":
                # the long factors: any length beyond the original one
                cases.append(config_case(name, text, layer_type, p["original_max_position_embeddings"] + 1))
        v5 = v5_form(block)
        v5_path = os.path.join(CONFIG_DIR, "v5", f"{name}.json")
        with open(v5_path, "w", encoding="utf-8", newline="\n") as f:
            f.write(json.dumps(v5, indent=2) + "\n")
        print(f"wrote {v5_path}")
    write_fixture(
        "rope_configs.json",
        {
            "generator": GENERATOR,
            "reference": "for each configs/NAME.json: config = CONFIG_MAPPING[model_type](**rest).get_text_config(); "
            "inv_freq and attention_factor from the model's RotaryEmbedding(config) (per layer type when "
            "rope_parameters is nested), or ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len) when "
            "seq_len is given; softmax_multiplier = Attention(config, layer_idx).scaling * sqrt(q.k width) "
            "(module built on the meta device); logit_multiplier = attention_factor^2 * softmax_multiplier; "
            "temperature (Ministral 3): get_llama_4_attn_scale at temperature_positions",
            "v5_forms": "configs/v5/NAME.json: the block with rope_scaling, rope_theta, rotary_emb_base, rotary_pct, "
            "partial_rotary_factor and rope_local_base_freq replaced by config.to_dict()['rope_parameters']",
            "cases": cases,
        },
    )


# --------------------------------------------------------------------------
# 8. NTK-by-parts: YaRN's frequencies with attention_factor 1
# --------------------------------------------------------------------------


def rope_ntk_by_parts():
    """NTK-by-parts is YaRN's frequency ramp without its temperature: transformers has no
    rope_type of its own for it, so it is `_compute_yarn_parameters` with `attention_factor`
    1.0 given explicitly (which transformers then uses as is, ignoring mscale), through the
    same `rope_case` as rope.json. Head dims 32 (the byte LM's), 64, 128 x original lengths 128
    (the byte LM's) and 4096 x bases 1e4, 5e5 x factors 2, 4, 16 x truncate true/false, and
    five cases with other betas."""
    cases = []
    grid = [
        (dim, original, base, factor, truncate, None)
        for dim in [32, 64, 128]
        for original in [128, 4096]
        for base in [10000.0, 500000.0]
        for factor in [2.0, 4.0, 16.0]
        for truncate in [True, False]
    ]
    grid += [
        (32, 128, 10000.0, 16.0, True, (16.0, 2.0)),
        (64, 4096, 10000.0, 8.0, False, (64.0, 0.5)),
        # the ramp's ends: low clipped to 0 and high in (0, 1] (every pair but pair 0
        # interpolated); both below 0 (high < low: the ramp runs backwards, every pair kept);
        # both above the last pair (every pair kept)
        (32, 128, 10000.0, 4.0, False, (30.0, 15.0)),
        (32, 128, 10000.0, 4.0, True, (2000.0, 1000.0)),
        (32, 4096, 10000.0, 4.0, True, (0.1, 0.05)),
    ]
    for dim, original, base, factor, truncate, betas in grid:
        params = {
            "factor": factor,
            "original_max_position_embeddings": original,
            "attention_factor": 1.0,
            "truncate": truncate,
        }
        name = f"parts_d{dim}_L{original}_b{int(base)}_s{int(factor)}_{'trunc' if truncate else 'exact'}"
        if betas is not None:
            params["beta_fast"], params["beta_slow"] = betas
            name += f"_fast{betas[0]:g}_slow{betas[1]:g}"
        case = rope_case(name, "yarn", dim, base, int(factor * original), params)
        if case["attention_factor"] != 1.0:
            raise AssertionError(f"{name}: attention factor {case['attention_factor']}, not 1")
        cases.append(case)
    write_fixture(
        "rope_ntk_by_parts.json",
        {
            "generator": GENERATOR,
            "config": "as rope.json: LlamaConfig with head_dim=dim, max_position_embeddings=factor*original, "
            "rope_parameters={'rope_type': 'yarn', 'rope_theta': base, 'factor': factor, "
            "'original_max_position_embeddings': original, 'attention_factor': 1.0, 'truncate': truncate"
            "[, 'beta_fast', 'beta_slow']}",
            "call": "ROPE_INIT_FUNCTIONS['yarn'](config, None, seq_len=None)",
            "cases": cases,
        },
    )


# --------------------------------------------------------------------------
# 9. Trained schemes of issue 27: dynamic position bias (x-transformers), partial rotary
#    (transformers' GPT-NeoX and x-transformers' rotary_emb_dim), p-RoPE (transformers'
#    "proportional" rope_type) and the RoPE/NoPE layer layouts (Llama 4, Cohere 2)
# --------------------------------------------------------------------------


def x_transformers_version():
    import x_transformers  # noqa: F401  (imported here: only these fixtures need it)
    from importlib.metadata import version

    return version("x-transformers")


def dpb():
    """x-transformers' DynamicPositionBias(dim, heads=, depth=, log_distance=, norm=), seeded,
    its weights (torch layout: Linear weight [out, in]) and `forward(n, n)`, the [heads, n, n]
    bias b[h, i, j] = f(i - j). With norm, the LayerNorms' scales and shifts are drawn at random
    first (their initial 1 and 0 would not test them)."""
    from x_transformers.x_transformers import DynamicPositionBias

    cases = []
    grid = [
        # (dim, heads, depth, log_distance, norm, n, seed): the byte LM's default first
        (32, 4, 2, True, False, 20, 0),
        (32, 4, 2, False, False, 9, 1),
        (8, 2, 1, True, False, 7, 2),
        (16, 3, 3, True, True, 12, 3),
        (8, 1, 2, False, True, 5, 4),
    ]
    for dim, heads, depth, log_distance, norm, n, seed in grid:
        torch.manual_seed(seed)
        module = DynamicPositionBias(dim=dim, heads=heads, depth=depth, log_distance=log_distance, norm=norm)
        layers = []
        with torch.no_grad():
            for block in list(module.mlp)[:-1]:
                linear = block[0]
                layer = {"weight": f32_list(linear.weight), "bias": f32_list(linear.bias)}
                if norm:
                    ln = block[1]
                    # the first block's x-transformers LayerNorm: gamma only; nn.LayerNorm after
                    gamma = ln.gamma if hasattr(ln, "gamma") else ln.weight
                    gamma.uniform_(0.5, 1.5)
                    layer["gamma"] = f32_list(gamma)
                    if hasattr(ln, "bias") and ln.bias is not None:
                        ln.bias.uniform_(-0.5, 0.5)
                        layer["beta"] = f32_list(ln.bias)
                layers.append(layer)
            out = module.mlp[-1]
            bias = module(n, n)
        cases.append(
            {
                "dim": dim,
                "heads": heads,
                "depth": depth,
                "log_distance": log_distance,
                "norm": norm,
                "n": n,
                "seed": seed,
                "layers": layers,
                "out_weight": f32_list(out.weight),
                "out_bias": f32_list(out.bias),
                "bias": f32_list(bias),
            }
        )
    write_fixture(
        "dpb.json",
        {
            "generator": {**GENERATOR, "x-transformers": x_transformers_version()},
            "reference": "x_transformers.x_transformers.DynamicPositionBias(dim, heads=, depth=, log_distance=, norm=) "
            "after torch.manual_seed(seed); bias = module(n, n), [heads][i][j] = f(i - j)",
            "cases": cases,
        },
    )


def rope_partial():
    """Partial rotary as the two references lay it out: transformers' GPT-NeoX
    (`partial_rotary_factor`: the first int(head_dim * factor) channels rotated in the half
    layout, inv_freq over that rotary width; `GPTNeoXRotaryEmbedding` and the model's
    `apply_rotary_pos_emb`) and x-transformers (`rotary_emb_dim`: `RotaryEmbedding(dim)` and
    `apply_rotary_pos_emb`, the first `dim` channels rotated in adjacent pairs). Each case: the
    inverse frequencies, a seeded input x [L][head_dim] and its rotation at positions 0..L."""
    from x_transformers.x_transformers import RotaryEmbedding, apply_rotary_pos_emb as xt_apply
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding, apply_rotary_pos_emb

    cases = []
    for head_dim, factor, base, length in [(32, 0.25, 10000.0, 9), (64, 0.25, 10000.0, 7), (80, 0.4, 10000.0, 6), (32, 0.5, 500000.0, 5)]:
        heads = 4
        config = GPTNeoXConfig(
            hidden_size=heads * head_dim,
            num_attention_heads=heads,
            rope_parameters={"rope_type": "default", "rope_theta": base, "partial_rotary_factor": factor},
        )
        embedding = GPTNeoXRotaryEmbedding(config)
        torch.manual_seed(head_dim + length)
        x = torch.randn(1, 1, length, head_dim)
        cos, sin = embedding(x, torch.arange(length)[None])
        rotated, _ = apply_rotary_pos_emb(x, x, cos, sin)
        cases.append(
            {
                "reference": "transformers gpt_neox",
                "layout": "half",
                "head_dim": head_dim,
                "partial_rotary_factor": factor,
                "base": base,
                "inv_freq": f32_list(embedding.inv_freq),
                "x": f32_list(x[0, 0]),
                "rotated": f32_list(rotated[0, 0]),
            }
        )
    for head_dim, rotary_dim, length in [(32, 16, 9), (64, 32, 6), (32, 8, 5)]:
        embedding = RotaryEmbedding(rotary_dim)
        torch.manual_seed(head_dim + rotary_dim + length)
        x = torch.randn(1, length, head_dim)
        freqs, scale = embedding.forward_from_seq_len(length)
        rotated = xt_apply(x, freqs, scale)
        cases.append(
            {
                "reference": "x-transformers",
                "layout": "interleaved",
                "head_dim": head_dim,
                "rotary_emb_dim": rotary_dim,
                "base": 10000.0,
                "inv_freq": f32_list(embedding.inv_freq),
                "x": f32_list(x[0]),
                "rotated": f32_list(rotated[0]),
            }
        )
    write_fixture(
        "rope_partial.json",
        {
            "generator": {**GENERATOR, "x-transformers": x_transformers_version()},
            "transformers": "GPTNeoXConfig(hidden_size=4*head_dim, num_attention_heads=4, rope_parameters={'rope_type': "
            "'default', 'rope_theta': base, 'partial_rotary_factor': factor}); GPTNeoXRotaryEmbedding(config)(x, "
            "positions) and modeling_gpt_neox.apply_rotary_pos_emb, x of shape [1, 1, L, head_dim] from torch.randn "
            "after torch.manual_seed(head_dim + L)",
            "x-transformers": "RotaryEmbedding(rotary_emb_dim).forward_from_seq_len(L) and apply_rotary_pos_emb(x, freqs, "
            "scale), x of shape [1, L, head_dim] from torch.randn after torch.manual_seed(head_dim + rotary_emb_dim + L)",
            "cases": cases,
        },
    )


def rope_proportional():
    """p-RoPE (Barbero et al. 2024) as transformers computes it: `rope_type` "proportional"
    (Gemma 4's global layers), `partial_rotary_factor` p = the fraction of the head_dim/2 pairs
    that rotate: int(p * head_dim // 2) inverse frequencies base^(-2i/head_dim), then zeros for
    the lowest frequencies. Through the same `rope_case` as rope.json."""
    cases = []
    for dim, base, p in [
        (32, 10000.0, 0.75),
        (32, 10000.0, 0.25),
        (32, 10000.0, 0.5),
        (32, 10000.0, 1.0),
        (32, 10000.0, 0.0),
        (32, 10000.0, 0.3),
        (256, 1000000.0, 0.25),
        (64, 500000.0, 0.75),
    ]:
        name = f"proportional_d{dim}_b{int(base)}_p{p:g}"
        params = {"partial_rotary_factor": p}
        cases.append(rope_case(name, "proportional", dim, base, 8192, params))
    write_fixture(
        "rope_proportional.json",
        {
            "generator": GENERATOR,
            "config": "as rope.json: LlamaConfig with head_dim=dim, rope_parameters={'rope_type': 'proportional', "
            "'rope_theta': base, 'partial_rotary_factor': p}",
            "call": "ROPE_INIT_FUNCTIONS['proportional'](config, None, seq_len=None)",
            "cases": cases,
        },
    )


def rope_nope_layers():
    """Which layers have no position encoding in the RoPE/NoPE layouts of transformers' configs:
    Llama 4 (`no_rope_layers`: 0 where a layer is NoPE, from `no_rope_layer_interval`) and
    Cohere 2 / Command A (`layer_types`: RoPE only on the "sliding_attention" layers, from
    `sliding_window_pattern`)."""
    from transformers import Cohere2Config, Llama4TextConfig

    cases = []
    for layers, every in [(4, 4), (8, 4), (12, 4), (6, 3), (5, 2), (3, 4), (4, 1)]:
        llama4 = Llama4TextConfig(num_hidden_layers=layers, no_rope_layer_interval=every)
        cohere = Cohere2Config(num_hidden_layers=layers, sliding_window_pattern=every)
        cases.append(
            {
                "layers": layers,
                "every": every,
                "llama4_nope": [i for i, rope in enumerate(llama4.no_rope_layers) if rope == 0],
                "cohere2_nope": [i for i, t in enumerate(cohere.layer_types) if t != "sliding_attention"],
                "llama4_attn_temperature_tuning": llama4.attn_temperature_tuning,
            }
        )
    write_fixture(
        "rope_nope_layers.json",
        {
            "generator": GENERATOR,
            "reference": "Llama4TextConfig(num_hidden_layers, no_rope_layer_interval).no_rope_layers (0: NoPE) and "
            "Cohere2Config(num_hidden_layers, sliding_window_pattern).layer_types (RoPE only on sliding_attention "
            "layers, Cohere2Attention)",
            "cases": cases,
        },
    )


def dd_alibi():
    """x-transformers' DataDependentAlibi(dim, heads) (causal, bias_init 5, post_log_scale 1),
    seeded, on a seeded input x [1, n, dim]: its gate (torch layout: Linear weight [heads, dim])
    and `forward(x)`, the [heads, n, n] bias C_i - C_j with C the running sum of
    ln sigmoid(x W^T + b) over the tokens (future keys included). One case draws the gate's
    bias at random (its initial 5 everywhere would not test the per-head bias)."""
    from x_transformers.x_transformers import DataDependentAlibi

    cases = []
    # (dim, heads, n, input scale, random bias, seed)
    grid = [(8, 2, 6, 1.0, False, 0), (16, 4, 9, 4.0, False, 1), (12, 3, 7, 2.0, True, 2)]
    for dim, heads, n, scale, random_bias, seed in grid:
        torch.manual_seed(seed)
        module = DataDependentAlibi(dim, heads)
        linear = module.to_forget_gates[0]
        x = torch.randn(1, n, dim) * scale
        with torch.no_grad():
            if random_bias:
                linear.bias.uniform_(-3.0, 6.0)
            bias = module(x)[0]
        cases.append(
            {
                "dim": dim,
                "heads": heads,
                "n": n,
                "seed": seed,
                "weight": f32_list(linear.weight),
                "bias": f32_list(linear.bias),
                "x": f32_list(x[0]),
                "attn_bias": f32_list(bias),
            }
        )
    write_fixture(
        "dd_alibi.json",
        {
            "generator": {**GENERATOR, "x-transformers": x_transformers_version()},
            "reference": "x_transformers.x_transformers.DataDependentAlibi(dim, heads) after torch.manual_seed(seed); "
            "x = torch.randn(1, n, dim) * scale; attn_bias = module(x)[0], [heads][i][j] = C_i - C_j",
            "cases": cases,
        },
    )


def cope():
    """x-transformers' CoPE(dim=dim_head, heads, max_pos) (soft_onehot and talking_heads off),
    as x-transformers' Attend applies it: attn_logits = (q k^T) * dim_head^-0.5, future keys
    filled with -finfo.max (so their gates are 0), then `cope(q, attn_logits)`, the
    [heads, n, n] term added to the logits. The position embeddings are drawn at random (their
    initial zeros would give a zero term)."""
    from x_transformers.x_transformers import CoPE

    cases = []
    # (dim_head, heads, n, max_pos, q/k scale, seed): counts below and above max_pos - 1
    grid = [(8, 2, 6, 16, 1.0, 0), (4, 3, 12, 4, 2.0, 1), (8, 1, 9, 5, 0.5, 2)]
    for dim, heads, n, max_pos, scale, seed in grid:
        torch.manual_seed(seed)
        module = CoPE(dim=dim, heads=heads, max_pos=max_pos)
        q = torch.randn(1, heads, n, dim) * scale
        k = torch.randn(1, heads, n, dim) * scale
        with torch.no_grad():
            module.pos_emb.normal_()
            sim = torch.einsum("b h i d, b h j d -> b h i j", q, k) * dim**-0.5
            causal = torch.ones(n, n, dtype=torch.bool).triu(1)
            sim = sim.masked_fill(causal, -torch.finfo(sim.dtype).max)
            term = module(q, sim)[0]
        cases.append(
            {
                "dim_head": dim,
                "heads": heads,
                "n": n,
                "max_pos": max_pos,
                "seed": seed,
                "q": f32_list(q[0]),
                "k": f32_list(k[0]),
                "pos_emb": f32_list(module.pos_emb.detach()),
                "term": f32_list(term),
            }
        )
    write_fixture(
        "cope.json",
        {
            "generator": {**GENERATOR, "x-transformers": x_transformers_version()},
            "reference": "x_transformers.x_transformers.CoPE(dim=dim_head, heads=heads, max_pos=max_pos) after "
            "torch.manual_seed(seed), pos_emb drawn N(0, 1); term = module(q, sim)[0] with sim = q k^T / sqrt(dim_head), "
            "future keys -finfo.max (x_transformers.attend.Attend), [heads][i][j], j <= i",
            "cases": cases,
        },
    )


FIXTURES = {
    "t5_buckets.json": t5_buckets,
    "deberta_buckets.json": deberta_buckets,
    "alibi_slopes.json": alibi_slopes,
    "rope.json": rope,
    "xl_rel_shift.json": xl_rel_shift_fixture,
    "rope_yarn_grid.json": rope_yarn_grid,
    "rope_configs.json": rope_configs,
    "rope_ntk_by_parts.json": rope_ntk_by_parts,
    "dpb.json": dpb,
    "rope_partial.json": rope_partial,
    "rope_proportional.json": rope_proportional,
    "rope_nope_layers.json": rope_nope_layers,
    "dd_alibi.json": dd_alibi,
    "cope.json": cope,
}


def main():
    """Writes every fixture, or only those named on the command line (`rope_ntk_by_parts.json`;
    `rope_configs.json` also writes configs/v5/)."""
    names = sys.argv[1:] or list(FIXTURES)
    unknown = [n for n in names if n not in FIXTURES]
    if unknown:
        raise SystemExit(f"unknown fixture(s) {unknown}; known: {', '.join(FIXTURES)}")
    torch.use_deterministic_algorithms(True)
    print(f"generator: {GENERATOR}", file=sys.stderr)
    for name in names:
        FIXTURES[name]()


if __name__ == "__main__":
    main()
