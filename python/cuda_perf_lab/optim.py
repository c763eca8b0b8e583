"""FlatAdamW: torch.optim.AdamW over one flat buffer, stepped by the lab's flat AdamW kernel.

The fused GPT-2 step of chapter 4 keeps every parameter in one flat fp32 array, and its gradients
and AdamW's two moments in three more, so that one launch updates the whole model moving the 28
bytes a parameter AdamW must move (read p, g, m, v; write p, m, v). FlatAdamW gives a PyTorch
model the same layout: on construction it moves the parameters into one flat tensor (each
parameter becomes a view of it, starting on a 16-byte boundary: .data is rebound, the Parameter
objects stay the ones the model holds), the moments into two more.

The gradients, two ways, as zero_grad says:
  - zero_grad() (set_to_none=True, PyTorch's default) sets each .grad to None: backward then hands
    each parameter the gradient tensor it made, with nothing copied or added. The flat gradient
    buffer is not kept.
  - zero_grad(set_to_none=False) zeroes a flat gradient buffer and makes each .grad a view of it,
    which backward accumulates into in place (an add a parameter each backward: at GPT-2 small's
    101M parameters 1.2 GB moved, 0.51 ms a step on an H200). Construction leaves the gradients as
    they are (None for a fresh model) and makes no flat gradient: a model's peak memory is then
    PyTorch's AdamW's, less AdamW's per-tensor state.
Gradient accumulation over micro-batches works either way. step() reads each gradient where it lies
(torch.ops.cuda_perf_lab.adamw_list_: one launch a 128 tensors, the flat kernel's 28 bytes a
parameter, the table of gradients in the kernel's parameters); one that is not contiguous float32
on the device, or does not start on a 16-byte boundary, is copied first.

Its arithmetic is torch.optim.AdamW's (defaults included); differences in use:
  - one parameter group; every parameter float32 and on one CUDA device;
  - every parameter must have a gradient at each step (AdamW skips one without; a single launch
    cannot, and a zero gradient would still move it): a missing one raises ValueError.
lr, betas, eps and weight_decay are read from param_groups[0] at each step, so schedulers work.
state_dict() is AdamW's format (per parameter: step, exp_avg, exp_avg_sq).
"""
import torch

from . import _C  # noqa: F401  (registers torch.ops.cuda_perf_lab.adamw_)


class FlatAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: %r" % (lr,))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: %r" % (eps,))
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError("Invalid beta parameters: %r" % (betas,))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: %r" % (weight_decay,))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        if len(self.param_groups) != 1:
            raise ValueError("FlatAdamW takes one parameter group (got %d)" % len(self.param_groups))
        params = self.param_groups[0]["params"]
        if not params:
            raise ValueError("FlatAdamW got no parameters")
        device = params[0].device
        for i, p in enumerate(params):
            if p.dtype != torch.float32 or not p.is_cuda or p.device != device:
                raise ValueError("FlatAdamW: parameter %d is %s on %s; all must be float32 on one CUDA device (%s)"
                                 % (i, p.dtype, p.device, device))
        # Each parameter at a multiple of 4 elements (16 bytes), as adamw_list_ lays them out: the
        # padding between them is zero in every flat tensor and stays zero under either kernel.
        self._views, at = [], 0
        for p in params:
            self._views.append((at, p.numel()))
            at += (p.numel() + 3) // 4 * 4
        self.flat = torch.zeros(at, device=device)
        self.flat_grad = None  # made by zero_grad(set_to_none=False) only
        self.exp_avg = torch.zeros(at, device=device)
        self.exp_avg_sq = torch.zeros(at, device=device)
        with torch.no_grad():
            for (at, k), p in zip(self._views, params):
                view = self.flat[at:at + k].view_as(p)
                view.copy_(p)
                p.data = view  # a gradient the parameter has stays where it is: step() reads it there
        self._step = 0

    def _grad_view(self, i, p):
        at, k = self._views[i]
        return self.flat_grad[at:at + k].view_as(p)

    @torch.no_grad()
    def zero_grad(self, set_to_none=True):
        params = self.param_groups[0]["params"]
        if set_to_none:
            self.flat_grad = None  # backward makes each gradient; the flat buffer's memory goes back
            for p in params:
                p.grad = None
            return
        if self.flat_grad is None:
            self.flat_grad = torch.zeros_like(self.flat)
        else:
            self.flat_grad.zero_()
        for i, p in enumerate(params):
            if p.grad is None or p.grad.data_ptr() != self._grad_view(i, p).data_ptr():
                p.grad = self._grad_view(i, p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        group = self.param_groups[0]
        params = group["params"]
        for i, p in enumerate(params):
            if p.grad is None:
                raise ValueError("FlatAdamW: parameter %d has no gradient; the flat step updates every parameter "
                                 "(torch.optim.AdamW would skip it)" % i)
        self._step += 1
        beta1, beta2 = group["betas"]
        hyper = (self._step, float(group["lr"]), float(beta1), float(beta2), float(group["eps"]),
                 float(group["weight_decay"]))
        # One kernel for either way of keeping the gradients (the flat gradient's views start on 16-byte
        # boundaries too), so that the two give the same parameters bit for bit: the flat kernel
        # rounds the same formula with its multiply-adds paired otherwise (ptxas's choice), and its
        # parameters would differ from the list kernel's by an ulp here and there.
        torch.ops.cuda_perf_lab.adamw_list_(self.flat, [self._readable(p.grad) for p in params], self.exp_avg,
                                            self.exp_avg_sq, *hyper)
        return loss

    @staticmethod
    def _readable(g):
        """g as adamw_list_ reads it: contiguous float32 from a 16-byte boundary (a copy where not)."""
        if g.dtype == torch.float32 and g.is_contiguous() and g.data_ptr() % 16 == 0:
            return g
        return torch.empty(g.shape, dtype=torch.float32, device=g.device).copy_(g)

    def state_dict(self):
        self._sync_state()
        return super().state_dict()

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        params = self.param_groups[0]["params"]
        steps = set()
        with torch.no_grad():
            for i, p in enumerate(params):
                at, k = self._views[i]
                st = self.state.get(p)
                if not st:
                    raise ValueError("FlatAdamW.load_state_dict: no state for parameter %d" % i)
                self.exp_avg[at:at + k].view_as(p).copy_(st["exp_avg"])
                self.exp_avg_sq[at:at + k].view_as(p).copy_(st["exp_avg_sq"])
                steps.add(int(st["step"]))
        if len(steps) != 1:
            raise ValueError("FlatAdamW.load_state_dict: the parameters' steps differ (%s)" % sorted(steps))
        self._step = steps.pop()
        self._sync_state()

    def _sync_state(self):
        """self.state as torch.optim.AdamW keeps it: views of the flat moments, and the step."""
        for i, p in enumerate(self.param_groups[0]["params"]):
            at, k = self._views[i]
            self.state[p] = {"step": torch.tensor(float(self._step)),
                             "exp_avg": self.exp_avg[at:at + k].view_as(p),
                             "exp_avg_sq": self.exp_avg_sq[at:at + k].view_as(p)}
