"""Token orders of the GPT (in which order it reads an image's pixels) and how local a rule's groups are in one.

    raster  row by row: token t reads pixel t (t = row*W + col); every checkpoint written before
            `token_order` existed reads this order.
    patch   the image cut into p x p patches (the DiT's patches, p = TrainConfig.patch_size), the
            patches in raster order, the pixels of a patch in raster order within it.
    random  one fixed permutation of the pixels (numpy default_rng(0)): a control without locality.

An order is a permutation `perm` (H*W,) int64 with perm[t] = the raster index of the pixel read at
token t. The GPT's architecture dict stores it (`token_perm`), so a checkpoint keeps its order
whatever numpy's generators do later. A leaf module (numpy only).
"""
import numpy as np

from scoreprobe.errors import ConfigError

TOKEN_ORDERS = ("raster", "patch", "random")
RANDOM_ORDER_SEED = 0


def pixel_order(order, shape, patch_size=2):
    """perm (H*W,) int64 of a token order for images of spatial `shape` (H, W); see the module doc.

    ConfigError for an unknown order, or for order "patch" when patch_size does not divide H and W.
    """
    H, W = (int(s) for s in shape)
    if order == "raster":
        return np.arange(H * W, dtype=np.int64)
    if order == "random":
        return np.random.default_rng(RANDOM_ORDER_SEED).permutation(H * W).astype(np.int64)
    if order != "patch":
        raise ConfigError(f"token_order must be one of {', '.join(TOKEN_ORDERS)}, got {str(order)[:40]!r}")
    p = int(patch_size)
    if p < 1 or H % p or W % p:
        raise ConfigError(f"token_order 'patch' needs patch_size {p} to divide the {H}x{W} image")
    grid = np.arange(H * W, dtype=np.int64).reshape(H // p, p, W // p, p)   # (patch row, r, patch col, c)
    return grid.transpose(0, 2, 1, 3).reshape(-1)                          # patch-major, raster inside


def check_pixel_order(perm, n):
    """perm as an int64 array (n,) when it is a permutation of 0..n-1, else ConfigError."""
    if not isinstance(perm, (list, tuple, np.ndarray)) or len(perm) != n:
        raise ConfigError(f"token_perm must be a list of the {n} pixel indices, got {str(perm)[:60]}")
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in perm):
        raise ConfigError("token_perm must hold integers")
    arr = np.asarray(perm, dtype=np.int64)
    if not np.array_equal(np.sort(arr), np.arange(n)):
        raise ConfigError(f"token_perm is not a permutation of 0..{n - 1}")
    return arr


def check_token_order(order, perm, n):
    """ConfigError unless `order` is a TOKEN_ORDERS name with `perm` None for raster and a permutation of
    0..n-1 (check_pixel_order) otherwise, as an architecture dict stores them."""
    if order not in TOKEN_ORDERS or (perm is None) != (order == "raster"):
        raise ConfigError(f"token_order must be one of {TOKEN_ORDERS} with a token_perm unless raster, got "
                          f"{str(order)[:40]!r}")
    if perm is not None:
        check_pixel_order(perm, n)


def group_locality(groups, shape, perm, patch_size=2):
    """How local a rule's pixel groups are in a token order, and within the DiT's patches.

    groups : (n_groups, G) raster pixel indices (e.g. Parity.groups); shape : (H, W);
    perm : (H*W,) token order (pixel_order). Returns a dict of plain numbers:
      n_groups; n_adjacent: groups whose G pixels are G consecutive tokens (for pairs: neighbouring
      tokens); mean_span: mean over groups of (last token - first token) (for pairs: the token
      distance); max_span; n_in_patch: groups lying inside one p x p patch (p = patch_size).
    """
    groups = np.asarray(groups, dtype=np.int64)
    H, W = (int(s) for s in shape)
    token_of = np.empty(H * W, dtype=np.int64)
    token_of[np.asarray(perm, dtype=np.int64)] = np.arange(H * W)            # pixel -> token index
    tokens = token_of[groups]                                                # (n_groups, G)
    span = tokens.max(axis=1) - tokens.min(axis=1)                           # (n_groups,)
    p = int(patch_size)
    patch = (groups // W // p) * (W // p) + (groups % W) // p                # (n_groups, G) patch index
    return {"n_groups": int(len(groups)), "n_adjacent": int((span == groups.shape[1] - 1).sum()),
            "mean_span": float(span.mean()), "max_span": int(span.max()),
            "n_in_patch": int((patch == patch[:, :1]).all(axis=1).sum())}
