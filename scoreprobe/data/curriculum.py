"""The curriculum over G: pieces that tile the rule's parity groups, their training images, and
the rule clock of a curriculum run.

`--curriculum G0:G:STEPS` trains on images valid under *finer* groups until step STEPS. Each of the
rule's groups of G pixels (its own layout and seed) is cut into consecutive pieces of G0 pixels; when
G0 does not divide G the last piece is shorter (G = 3 from G0 = 2: a pair and a single pixel). Every
piece has even parity, so every group has too: a curriculum image is valid under the rule, and the
rule is a coarsening of the curriculum's. A piece of one pixel has even parity only when that pixel is
0, so with a remainder of 1 those pixels are 0 throughout the first phase (documented in
docs/remedies.md). The held-out set and every clock use the rule itself; `beyond_pieces` reads the
rule clock of samples that leave the curriculum's narrower set.
"""
import numpy as np

from scoreprobe.errors import ConfigError

MAX_ROUNDS = 50


def fine_groups(rule, g_start):
    """The curriculum's pieces: each row of rule.groups (n_groups, G) cut into consecutive pieces of
    g_start pixels, the last one shorter when g_start does not divide G. list of int64 arrays."""
    return [grp[i:i + g_start] for grp in rule.groups for i in range(0, rule.G, g_start)]


def fine_valid(chunks, bits):
    """bits (N, D) uint8 -> bool (N,): every piece in `chunks` has an even number of ones."""
    return np.all([bits[:, c].sum(axis=1) % 2 == 0 for c in chunks], axis=0)


def sample_fine(chunks, n_bits, n, rng):
    """(n, n_bits) uint8, uniform over images whose pieces (`chunks`) all have even parity: free bits
    are fair coins and the last bit of each piece fixes its parity (a one-pixel piece is 0)."""
    bits = (rng.random((n, n_bits)) < 0.5).astype(np.uint8)
    for c in chunks:
        bits[:, c[-1]] = bits[:, c[:-1]].sum(axis=1) % 2
    return bits


def curriculum_bits(rule, g_start, n, exclude, seed):
    """The first phase's training set: n distinct images valid under fine_groups(rule, g_start), drawn
    with `seed` in order of first appearance, none of them a row of `exclude` (the held-out set).

    rule: a Parity rule; exclude: (M, D) uint8. Returns (n, D) uint8. ConfigError when too few exist.
    """
    chunks = fine_groups(rule, g_start)
    exclude = np.asarray(exclude, dtype=np.uint8).reshape(-1, rule.n_bits)
    available = 2 ** (rule.n_bits - len(chunks)) - int(fine_valid(chunks, exclude).sum())
    if available < n:
        raise ConfigError(f"curriculum: parity with groups of {g_start} inside groups of {rule.G} has {available} "
                          f"images outside the held-out set, fewer than n_train={n}")
    rng, seen, keep = np.random.default_rng(seed), {row.tobytes() for row in exclude}, []
    for _ in range(MAX_ROUNDS):
        for row in sample_fine(chunks, rule.n_bits, max(1024, 2 * n), rng):
            if row.tobytes() not in seen:
                seen.add(row.tobytes())
                keep.append(row)
                if len(keep) == n:
                    return np.stack(keep)
    raise ConfigError(f"curriculum: drew only {len(keep)} distinct images of {n} in {MAX_ROUNDS} rounds")


def piece_valid(ds, rule, g_start):
    """(S, n) bool: which samples of a clocks Dataset with `bits` (clocks(..., keep_bits=True)) satisfy
    every piece of fine_groups(rule, g_start) (ConfigError without `bits`)."""
    if "bits" not in ds:
        raise ConfigError("beyond_pieces needs the samples: measure with clocks(..., keep_bits=True)")
    bits = np.asarray(ds["bits"].values, dtype=np.uint8)                           # (S, n, D)
    return fine_valid(fine_groups(rule, g_start), bits.reshape(-1, bits.shape[-1])).reshape(bits.shape[:2])


def beyond_state(state, piece):
    """state (S, n) codes of scoreprobe.data.STATES with the valid, non-copied samples that satisfy every
    piece (`piece` (S, n) bool) recoded as rule-violating; copies stay valid. Returns (state, valid):
    the new codes (S, n) and the samples valid beyond the pieces (S, n) bool."""
    from scoreprobe.data.datasets import STATE_CODES
    state = np.asarray(state)
    new = np.isin(state, [STATE_CODES["valid_novel"], STATE_CODES["valid_heldout"]])
    valid = (new & ~piece) | (state == STATE_CODES["valid_memorized"])
    return np.where(new & piece, STATE_CODES["rule_violating"], state).astype(state.dtype), valid


def beyond_pieces(ds, rule, g_start):
    """A clocks Dataset (with `bits`: clocks(..., keep_bits=True)) in which valid, non-copied samples
    that also satisfy the curriculum's pieces count as rule-violating, so `taus` of it reads the rule
    clock of samples that use the final rule's freedom. Rule accuracy cannot tell a model that learned
    the curriculum's narrower set (all of it valid under the rule) from one that learned the rule.

    ds: Dataset with `state` (step, sample) and `bits` (step, sample, bit); rule: the Parity rule;
    g_start: the curriculum's piece size. Returns a copy with `state`, `rule_acc` replaced and
    `piece_share` (step,): the share of samples that satisfy every piece.
    """
    piece = piece_valid(ds, rule, g_start)                                         # (S, n)
    state, valid = beyond_state(ds["state"].values, piece)
    dims = ds["state"].dims
    return ds.assign(state=(dims, state, ds["state"].attrs),
                     rule_acc=(dims[:1], valid.mean(axis=1), {"long_name": "rule accuracy beyond the pieces"}),
                     piece_share=(dims[:1], piece.mean(axis=1), {"long_name": "share of samples valid on every piece"}))
