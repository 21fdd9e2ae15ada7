# The reference vectors in tests/fixtures/mpnet_reference.json: an independent numpy forward pass
# of sentence-transformers all-mpnet-base-v2 following Hugging Face modeling_mpnet, to check the
# Rust port (memgpt-providers/src/local_embed/encoder.rs) against.
#   python3 tests/support/mpnet_reference.py MODEL_DIR OUT.json   (needs numpy, tokenizers, safetensors)
import json, math, sys
import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer
d = sys.argv[1]
cfg = json.load(open(d + '/config.json'))
W = load_file(d + '/model.safetensors')
tok = Tokenizer.from_file(d + '/tokenizer.json'); tok.no_padding(); tok.no_truncation()
H = cfg['hidden_size']; NH = cfg['num_attention_heads']; dh = H // NH; eps = cfg['layer_norm_eps']
def ln(x, p): 
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * W[p + '.weight'] + W[p + '.bias']
def lin(x, p): return x @ W[p + '.weight'].T + W[p + '.bias']
from math import erf
verf = np.vectorize(erf)
def gelu(x): return 0.5 * x * (1 + verf(x / math.sqrt(2)))
def bucket(rel, nb=32, md=128):
    ret = 0; n = -rel; nb //= 2
    ret += (n < 0) * nb; n = abs(n); me = nb // 2
    if n < me: return ret + n
    v = me + int(math.log(n / me) / math.log(md / me) * (nb - me))
    return ret + min(v, nb - 1)
def embed(text, maxlen=384):
    ids = tok.encode(text).ids[:maxlen]
    if len(ids) == maxlen: ids[-1] = 2
    L = len(ids)
    pos = np.arange(L) + cfg['pad_token_id'] + 1
    x = W['embeddings.word_embeddings.weight'][ids] + W['embeddings.position_embeddings.weight'][pos]
    x = ln(x, 'embeddings.LayerNorm')
    rb = W['encoder.relative_attention_bias.weight']  # [32, heads]
    B = np.zeros((NH, L, L), dtype=np.float32)
    for i in range(L):
        for j in range(L):
            B[:, i, j] = rb[bucket(j - i)]
    for l in range(cfg['num_hidden_layers']):
        p = f'encoder.layer.{l}'
        q = lin(x, p + '.attention.attn.q').reshape(L, NH, dh).transpose(1, 0, 2)
        k = lin(x, p + '.attention.attn.k').reshape(L, NH, dh).transpose(1, 0, 2)
        v = lin(x, p + '.attention.attn.v').reshape(L, NH, dh).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh) + B
        s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
        c = (s @ v).transpose(1, 0, 2).reshape(L, H)
        x = ln(lin(c, p + '.attention.attn.o') + x, p + '.attention.LayerNorm')
        h = gelu(lin(x, p + '.intermediate.dense'))
        x = ln(lin(h, p + '.output.dense') + x, p + '.output.LayerNorm')
    m = x.mean(0)
    return m / np.linalg.norm(m)
texts = ["A man is eating food.", "The quarterly budget review moved to Thursday afternoon.", "Ünïcode & punctuation: can't stop, won't stop!"]
out = [embed(t).tolist() for t in texts]
json.dump({"texts": texts, "vectors": out}, open(sys.argv[2], 'w'))
print([v[:4] for v in out])
