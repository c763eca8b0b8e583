"""torch.compile's LayerNorm forward, bf16 16384x768: run the compiled function (its Triton code goes to
stderr under TORCH_LOGS=output_code), N calls for ncu.
Run from the repository root: python3 ch03_kernels/results/layernorm_hints_s93/ln_inductor.py N"""
import sys, torch
F = torch.nn.functional
n, d = 16384, 768
def rand(*s, lo=-1.0, hi=1.0):
    return torch.empty(*s, device="cuda").uniform_(lo, hi).to(torch.bfloat16)
x, w, b = rand(n, d, lo=-2, hi=4), rand(d, lo=0.5, hi=1.5), rand(d, lo=-0.5, hi=0.5)
f = lambda x, w, b: F.layer_norm(x, (d,), w, b, 1e-5)
g = torch.compile(f)
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    y = g(x, w, b)
torch.cuda.synchronize()
print("max |y - eager|", (y.float() - f(x, w, b).float()).abs().max().item())
