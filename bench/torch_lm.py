"""The posenc byte LM in PyTorch, for the throughput benchmark (bench/run.sh).

Same shapes and arithmetic as src/lm/model: pre-LayerNorm decoder, tied byte embeddings scaled
by sqrt(d), Linear layers with bias, exact GELU, causal softmax attention with the scheme's
position term, AdamW (betas 0.9/0.95, eps 1e-8, weight decay 0.01, clip 1.0), batch 32 x 128
by default. Schemes: nope, rope (half layout), t5 (causal buckets, per-layer table), alibi,
deberta (relative embeddings projected by the layer's W_q, W_k; c2p + p2c on log buckets;
scores scaled by 1/sqrt(3 d_head)).

    python bench/torch_lm.py --scheme rope --steps 30 --threads 2
prints one JSON line: {"scheme", "tokens_per_second", "params", "first_loss", "last_loss"}.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def alibi_slopes(n):
    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + alibi_slopes(2 * c)[0::2][: n - c]


def t5_bucket(rel, num_buckets=32, max_distance=128):
    # causal (decoder) buckets of key - query
    n = -torch.clamp(rel, max=0)
    max_exact = num_buckets // 2
    large = max_exact + (
        torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).long()
    large = torch.clamp(large, max=num_buckets - 1)
    return torch.where(n < max_exact, n, large)


def deberta_index(L, bucket_size=64, max_position=128):
    """clip(bucket(i - j) + s, 0, 2s - 1), Hugging Face's make_log_bucket_position."""
    pos = torch.arange(L)
    rel = (pos[:, None] - pos[None, :]).float()
    mid = bucket_size // 2
    sign = torch.sign(rel)
    abs_pos = torch.where((rel < mid) & (rel > -mid), torch.tensor(mid - 1.0), rel.abs())
    log_pos = torch.ceil(torch.log(abs_pos / mid) / math.log((max_position - 1) / mid) * (mid - 1)) + mid
    bucket = torch.where(abs_pos <= mid, rel, log_pos * sign).long()
    return (bucket + bucket_size).clamp(0, 2 * bucket_size - 1)


class Attention(nn.Module):
    def __init__(self, d, h, scheme, L):
        super().__init__()
        self.h, self.dh, self.scheme = h, d // h, scheme
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        mask = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        self.register_buffer("mask", mask)
        pos = torch.arange(L)
        rel = pos[None, :] - pos[:, None]
        if scheme == "rope":
            inv = 1.0 / (10000 ** (torch.arange(0, self.dh, 2).float() / self.dh))
            ang = pos[:, None].float() * inv[None, :]
            self.register_buffer("cos", torch.cat([ang.cos(), ang.cos()], -1))
            self.register_buffer("sin", torch.cat([ang.sin(), ang.sin()], -1))
        if scheme == "t5":
            self.table = nn.Parameter(torch.randn(32, h) * 0.1)
            self.register_buffer("bucket", t5_bucket(rel))
        if scheme == "alibi":
            s = torch.tensor(alibi_slopes(h))
            self.register_buffer("bias", -s[:, None, None] * rel.abs()[None].float())
        if scheme == "deberta":
            self.rel = nn.Parameter(torch.randn(128, d))
            self.register_buffer("index", deberta_index(L))

    def rope(self, x):
        x1, x2 = x[..., : self.dh // 2], x[..., self.dh // 2 :]
        return x * self.cos + torch.cat([-x2, x1], -1) * self.sin

    def forward(self, x):
        B, L, D = x.shape
        split = lambda t: t.view(B, L, self.h, self.dh).transpose(1, 2)  # (B, H, L, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        if self.scheme == "rope":
            q, k = self.rope(q), self.rope(k)
        if self.scheme == "deberta":
            heads = lambda t: t.view(-1, self.h, self.dh).transpose(0, 1)  # (H, 2s, dh)
            kr, qr = heads(self.k(self.rel)), heads(self.q(self.rel))
            idx = self.index.expand(B, self.h, L, L)
            c2p = torch.gather(q @ kr.transpose(-1, -2), -1, idx)
            p2c = torch.gather(k @ qr.transpose(-1, -2), -1, idx.transpose(-1, -2)).transpose(-1, -2)
            s = (q @ k.transpose(-1, -2) + c2p + p2c) / math.sqrt(3 * self.dh)
        else:
            s = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        if self.scheme == "t5":
            s = s + self.table[self.bucket].permute(2, 0, 1)
        if self.scheme == "alibi":
            s = s + self.bias
        s = s.masked_fill(self.mask, float("-inf"))
        o = s.softmax(-1) @ v
        return self.o(o.transpose(1, 2).reshape(B, L, D))


class Block(nn.Module):
    def __init__(self, d, h, ff, scheme, L):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, h, scheme, L)
        self.up, self.down = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Lm(nn.Module):
    def __init__(self, scheme, layers=4, d=128, h=4, ff=512, L=128):
        super().__init__()
        self.d = d
        self.emb = nn.Parameter(torch.randn(256, d) / math.sqrt(d))
        self.blocks = nn.ModuleList(Block(d, h, ff, scheme, L) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        h = self.emb[x] * math.sqrt(self.d)
        for b in self.blocks:
            h = b(h)
        return self.ln(h) @ self.emb.t()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scheme", default="rope", choices=["nope", "rope", "t5", "alibi", "deberta"])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--len", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--corpus", default="data/corpus/train.txt")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    text = torch.tensor(list(open(a.corpus, "rb").read()), dtype=torch.long)
    model = Lm(a.scheme, L=a.len)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.01)
    g = torch.Generator().manual_seed(0)
    losses, t0 = [], None
    for step in range(a.steps):
        starts = torch.randint(0, len(text) - a.len - 1, (a.batch,), generator=g)
        w = torch.stack([text[s : s + a.len + 1] for s in starts])
        logits = model(w[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step == 0:
            t0 = time.perf_counter()
    rate = a.batch * a.len * (a.steps - 1) / (time.perf_counter() - t0)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"scheme": a.scheme, "tokens_per_second": rate, "params": params,
                      "first_loss": losses[0], "last_loss": losses[-1], "torch": torch.__version__}))


if __name__ == "__main__":
    main()
