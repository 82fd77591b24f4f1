"""Per-sample noise: standard normal rows that depend only on (seed, sample index), counter-based.

Value j of row i is a pure function of (seed, index[i], j), so a sample's noise is the same for
every batch size, chunk size, ordering and device, and a million rows are drawn without a Python
loop over rows:

    key_i   = mix64(mix64(seed) ^ mix64(index_i + γ))                 # one 64-bit key per sample
    w_ik    = mix64(key_i + k·γ),  k = 1 .. 2h,  h = ceil(d / 2)      # SplitMix64 stream of the key
    u_ik    = (w_ik >> 11) · 2^-53                                    # uniform on [0, 1), 53 bits
    row_i   = [r·cos(2π u_i,h+k), r·sin(2π u_i,h+k)]  with r = sqrt(-2 ln(1 - u_ik)), k = 1 .. h

(mix64 is the SplitMix64 finalizer, γ = 0x9E3779B97F4A7C15; Box–Muller; the first d values are
kept: h cosines, then d - h sines.) Everything is computed in float64 numpy on the CPU, in blocks
of BLOCK rows, then cast and moved, so the values are bit-identical on every device. Stores whose
values depend on this noise record NOISE in their config, and a store made with other noise is
refused rather than extended.
"""
import numpy as np
import torch

from scoreprobe.errors import ConfigError
from scoreprobe.limits import MAX_BITS, MAX_ROWS_BYTES, check_whole

NOISE = "splitmix64-box-muller"          # recorded in the config of stores that use this noise
BLOCK = 2048                             # rows per block: the working set stays in cache
_GAMMA = np.uint64(0x9E3779B97F4A7C15)   # SplitMix64's increment (the golden ratio in 64 bits)
_MASK64 = (1 << 64) - 1


def _mix64(z):
    """SplitMix64 finalizer: a bijection on uint64 that scrambles all bits. z: uint64 array."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _per_sample_keys(seed, index):
    """(M,) uint64 keys, one per index, hashed from (seed, index). index: (M,) int."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"randn_per_sample: seed must be an integer, got {seed!r}")
    key = _mix64(np.array([int(seed) & _MASK64], dtype=np.uint64))              # (1,)
    with np.errstate(over="ignore"):
        return _mix64(key ^ _mix64(index.astype(np.uint64) + _GAMMA))


def _normal_block(keys, d, out):
    """Fill out (B, d) float64 with the rows of keys (B,) uint64 (the formulas in the module doc)."""
    h = (d + 1) // 2
    counters = np.arange(1, 2 * h + 1, dtype=np.uint64) * _GAMMA                 # (2h,)
    words = _mix64(keys[:, None] + counters)                                     # (B, 2h) uint64
    u = (words >> np.uint64(11)).astype(np.float64) * 2.0 ** -53                 # (B, 2h) in [0, 1)
    r, angle = np.sqrt(-2.0 * np.log1p(-u[:, :h])), (2.0 * np.pi) * u[:, h:]     # (B, h) each
    out[:, :h] = r * np.cos(angle)
    out[:, h:] = (r * np.sin(angle))[:, :d - h]


def randn_per_sample(seed, index, d, dtype=torch.float32, device="cpu"):
    """Standard normal noise whose row i depends only on (seed, index[i]) (see the module doc).

    Parameters
    ----------
    seed : int.
    index : (M,) ints >= 0 (list, numpy or torch), the sample indices.
    d : int, the number of values per sample.

    Returns
    -------
    noise : (M, d) tensor of `dtype` on `device`; identical for any split of `index` into calls.
    """
    index = np.asarray(index.cpu() if torch.is_tensor(index) else index).reshape(-1)
    if index.size and (not np.issubdtype(index.dtype, np.integer) or index.min() < 0):
        raise ConfigError("randn_per_sample: index must hold non-negative integers")
    d = check_whole(d, "randn_per_sample: d (a positive integer)", 1, MAX_BITS)   # bits of an image (limits)
    if index.size * d * 8 > MAX_ROWS_BYTES:     # refused before the (M, d) float64 buffer
        raise ConfigError(f"randn_per_sample: {index.size} rows of {d} values need {index.size * d * 8 / 2**30:.1f} "
                          f"GiB (limit {MAX_ROWS_BYTES >> 30} GiB, scoreprobe.limits.MAX_ROWS_BYTES)")
    keys, out = _per_sample_keys(seed, index), np.empty((index.size, int(d)))     # (M,), (M, d)
    with np.errstate(over="ignore"):
        for start in range(0, index.size, BLOCK):
            _normal_block(keys[start:start + BLOCK], int(d), out[start:start + BLOCK])
    return torch.from_numpy(out).to(device=device, dtype=dtype)


def stream_seed(seed, stream):
    """The seed of noise stream `stream` (int >= 0) of `seed`: mix64(mix64(seed) ^ mix64((stream + 1)·γ)).

    Samplers that draw fresh noise at ODE step k use randn_per_sample(stream_seed(seed, k), index, d),
    so that noise too is a pure function of (seed, k, sample index), and it is independent of the
    initial noise randn_per_sample(seed, index, d) (a different 64-bit key; equal only by a hash
    collision). Returns a Python int in [0, 2^64).
    """
    if int(stream) != stream or stream < 0:
        raise ConfigError(f"stream_seed: stream must be a non-negative integer, got {stream!r}")
    key = _mix64(np.array([int(seed) & _MASK64], dtype=np.uint64))               # (1,)
    with np.errstate(over="ignore"):
        tag = _mix64(np.array([(int(stream) + 1) * int(_GAMMA) & _MASK64], dtype=np.uint64))
        return int(_mix64(key ^ tag)[0])
