"""What the torch_dccl checks compare against: deterministic inputs any rank
can rebuild, reductions computed here, gloo's result where gloo has the
operation, and a checker that collects failures instead of stopping."""
import sys
import traceback

import torch
import torch.distributed as dist

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Unit roundoff of each float type.
EPS = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53}


def make_input(seed, rank, dtype, shape):
    """Rank `rank`'s tensor for check `seed`: small values, so that sums and
    products of a few ranks stay in every integer type's range."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 6, shape, generator=g).to(dtype)
    if dtype == torch.int8:
        return torch.randint(-4, 4, shape, generator=g).to(dtype)
    if dtype in (torch.int32, torch.int64):
        return torch.randint(-50, 50, shape, generator=g).to(dtype)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 4).to(dtype)


# The factor of the PREMUL_SUM checks (exact in binary).
PREMUL_FACTOR = 0.375


def reduce_ref(inputs, name):
    """The reduction of the ranks' tensors, computed in 64 bits, in their dtype.
    Integer AVG truncates toward zero, as DirectCCL's does; PREMUL is the sum
    of the inputs each times PREMUL_FACTOR."""
    dtype = inputs[0].dtype
    n = len(inputs)
    if name == "PREMUL":
        return reduce_ref([(t.double() * PREMUL_FACTOR).to(dtype) for t in inputs], "SUM")
    if dtype == torch.bool:
        s = torch.stack(inputs)
        return {"MIN": s.all(0), "MAX": s.any(0), "PRODUCT": s.all(0)}[name]
    wide = torch.float64 if dtype in FLOATS else torch.int64
    s = torch.stack([t.to(wide) for t in inputs])
    if name == "SUM":
        r = s.sum(0)
    elif name == "PRODUCT":
        r = s.prod(0)
    elif name == "MIN":
        r = s.min(0).values
    elif name == "MAX":
        r = s.max(0).values
    elif name == "AVG":
        r = s.sum(0) / n if dtype in FLOATS else torch.div(s.sum(0), n, rounding_mode="trunc")
    else:
        raise ValueError(name)
    return r.to(dtype)


def tolerance(inputs, name, dtype):
    """Absolute bound on a float reduction's rounding error (any order of the
    ranks, intermediate results rounded to dtype); None (exact) otherwise."""
    if dtype not in FLOATS:
        return None
    n = len(inputs)
    if name == "PREMUL":
        name = "SUM"
    m = max(float(t.double().abs().max()) for t in inputs) if inputs[0].numel() else 0.0
    scale = m ** n if name == "PRODUCT" else m * n if name == "SUM" else m
    return 4 * (n + 1) * EPS[dtype] * max(scale, 1.0)


# How many references came from gloo and how many were computed here.
USED = {"gloo": 0, "computed": 0, "gloo refused": set()}


def same_on_gloo(ref_group, run, tensor, fallback):
    """gloo's result of run(tensor) on ref_group, or fallback() where gloo
    refuses the dtype or op (it does so at the call, on every rank alike)."""
    try:
        run(tensor)
        USED["gloo"] += 1
        return tensor
    except RuntimeError as e:
        USED["computed"] += 1
        USED["gloo refused"].add(str(e).split("\n")[0][:60])
        return fallback()


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.failures = []
        self.passed = 0

    def _fail(self, name, why):
        self.failures.append(f"{name}: {why}")

    def same(self, name, got, want, atol=None):
        """Exact (atol None) or within atol; dtype and shape must match."""
        if got.dtype != want.dtype or got.shape != want.shape:
            return self._fail(name, f"got {got.dtype}{tuple(got.shape)}, want {want.dtype}{tuple(want.shape)}")
        if atol is None:
            ok = torch.equal(got, want)
        else:
            ok = torch.allclose(got.double(), want.double(), rtol=0.0, atol=atol)
        if not ok:
            return self._fail(name, f"got {got.flatten()[:8].tolist()}, want {want.flatten()[:8].tolist()}"
                                    + ("" if atol is None else f" (atol {atol:.3g})"))
        self.passed += 1

    def true(self, name, cond):
        if not cond:
            return self._fail(name, "false")
        self.passed += 1

    def raises(self, name, text, fn, *args, **kwargs):
        """fn raises RuntimeError whose message names this rank and contains text."""
        try:
            fn(*args, **kwargs)
        except RuntimeError as e:
            msg = str(e)
            if text not in msg or f"rank {dist.get_rank(kwargs.get('group'))}/" not in msg:
                return self._fail(name, f"message lacks {text!r} or the rank: {msg}")
            self.passed += 1
            return
        except Exception:  # noqa: BLE001  a wrong exception type is a failure, shown whole
            return self._fail(name, "wrong exception: " + traceback.format_exc())
        self._fail(name, "did not raise")

    def finish(self):
        for f in self.failures:
            print(f"rank {self.rank}: FAIL {f}", file=sys.stderr, flush=True)
        print(f"rank {self.rank}: {self.passed} checks passed, {len(self.failures)} failed; references: "
              f"{USED['gloo']} from gloo, {USED['computed']} computed (gloo refused: "
              f"{'; '.join(sorted(USED['gloo refused'])) or 'nothing'})", flush=True)
        return 1 if self.failures or self.passed == 0 else 0
