#!/usr/bin/env python3
"""PyTorch in the operator sweep: every configuration of a demo_sweep_report JSON timed in PyTorch,
and the whole written in the users' benchmark's names, so that its analysis snippets run on it
unchanged (operation "LayerNorm", "GELU", "Swish", "Loss"; implementation "PyTorch", "CUDA",
"Triton").

  demo_sweep_report --json sweep.json                               (on the GPU: the lab's side)
  python3 tools/torch_sweep.py sweep.json --out merged.json         (on the GPU: PyTorch's side)
  python3 tools/torch_sweep.py sweep.json --torch torch.json --out merged.json   (no GPU: merge only)
  ... --markdown table.md        (also a table: the lab's final program, PyTorch eager and compiled)

For each (operation, batch, sequence, dimension) of the sweep it times, the lab's way (CUDA events,
the L2 flushed before each call, the median of --reps calls after warm-up: tools/torch_timing.py),
PyTorch's operator on the same shape the lab ran (tools/torch_reference.py's builders: F.layer_norm,
F.gelu, F.silu, F.mse_loss, F.cross_entropy, fp32) in eager mode and under torch.compile (--mode,
default "default"; a comma-separated list times each mode, e.g. --mode default,reduce-overhead,
max-autotune: the table then compares the lab with the fastest of all, and names it). Each mode is
compiled for its configuration alone (dynamo reset, dynamic=False: PyTorch's best for a fixed
shape) with the inputs marked as static addresses (so CUDA graphs do not copy them before each
replay). --json-torch FILE keeps those rows, and --torch FILE merges saved ones instead of timing.

The merged records are the sweep's, renamed (the lab's own names kept in fields of their own):
  operation       LayerNorm, GELU, Swish, or Loss (with "loss": "mse" or "cross_entropy");
                  "lab_operation" the lab's topic
  implementation  CUDA: the lab's optimized program; CUDA baseline, library: the lab's baseline and
                  library programs; PyTorch: eager; Triton: torch.compile, whose kernels inductor
                  writes in Triton ("source" says so); "lab_implementation" the lab's role
and PyTorch's rows carry the same fields (time_ms, throughput_gbps on the lab's byte count of the
configuration, inference_speed, gpu_efficiency, memory_mb: PyTorch's peak allocation in the call).
Records without a time (OOM, a failed run) are left out of the merged file (the users' snippets sum
every time_ms they select) and counted in the line it prints; the sweep's own JSON keeps them.

Exit status 0; 2 for a bad argument, a file it cannot read, or (when timing) no torch or GPU.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# torch.compile's modes, in the order the table gives them their columns.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
# The lab's operations in the users' names; the two losses share "Loss", told apart by "loss".
SEED_OPERATION = {"layernorm": "LayerNorm", "gelu": "GELU", "swish": "Swish", "mse": "Loss", "cross_entropy": "Loss"}
LAB_ROLE_NAME = {"optimized": "CUDA", "baseline": "CUDA baseline", "library": "library"}
# How a configuration maps onto a topic's shape, as demo_sweep_report's shape_for does: rows of the
# dimension for the row operations, all elements for the element-wise ones.
ROW_TOPICS = {"layernorm", "cross_entropy"}


def lab_shape(operation, batch, seq, dim):
    return [batch * seq, dim] if operation in ROW_TOPICS else [batch * seq * dim]


def seed_record(r, implementation, lab_implementation, source=None):
    """A sweep record in the users' names; the lab's own in lab_operation, lab_implementation."""
    out = dict(r)
    out["lab_operation"] = r["operation"]
    out["lab_implementation"] = lab_implementation
    out["operation"] = SEED_OPERATION[r["operation"]]
    if out["operation"] == "Loss":
        out["loss"] = r["operation"]
    out["implementation"] = implementation
    if source:
        out["source"] = source
    return out


def merge(lab_records, torch_records):
    """The lab's sweep records and PyTorch's (same fields, implementation "torch eager" or
    "torch.compile ...") as one list in the users' names, and how many were left out: a record
    without a time (OOM, a failed run) stays in the sweep's own JSON only, since the users'
    snippets sum every time_ms they select. Raises ValueError for a record it cannot name (an
    operation the users' benchmark does not have, an unknown implementation)."""
    out = []
    timed = [r for r in lab_records if r.get("time_ms") is not None]
    timed_torch = [r for r in torch_records if r.get("time_ms") is not None]
    left_out = len(lab_records) - len(timed) + len(torch_records) - len(timed_torch)
    lab_records, torch_records = timed, timed_torch
    for r in lab_records:
        if r.get("operation") not in SEED_OPERATION:
            raise ValueError("operation %r is not one of the users' benchmark's (%s)"
                             % (r.get("operation"), ", ".join(sorted(SEED_OPERATION))))
        role = r.get("implementation")
        if role not in LAB_ROLE_NAME:
            raise ValueError("lab implementation %r is not one of %s" % (role, ", ".join(LAB_ROLE_NAME)))
        out.append(seed_record(r, LAB_ROLE_NAME[role], role))
    for r in torch_records:
        if r.get("operation") not in SEED_OPERATION:
            raise ValueError("operation %r is not one of the users' benchmark's" % r.get("operation"))
        impl = r.get("implementation", "")
        if impl == "torch eager":
            out.append(seed_record(r, "PyTorch", impl, "PyTorch eager"))
        elif impl.startswith("torch.compile"):
            out.append(seed_record(r, "Triton", impl, impl + " (inductor's Triton kernels)"))
        else:
            raise ValueError("PyTorch implementation %r is neither torch eager nor torch.compile" % impl)
    return out, left_out


def configurations(lab_records):
    """The distinct (operation, batch, seq, dim) of the sweep, each with the lab's byte count."""
    seen = {}
    for r in lab_records:
        key = (r["operation"], r["batch_size"], r["sequence_length"], r["tensor_dimension"])
        if key not in seen and r.get("status", "ok") == "ok" and r.get("time_ms"):
            seen[key] = r["throughput_gbps"] * r["time_ms"] * 1e6  # bytes: GB/s x ms x 1e6
    return seen


def time_torch(torch, lab_records, modes, reps):
    """PyTorch's rows for every configuration of the sweep: eager and torch.compile in each mode."""
    import torch_reference
    from torch_timing import compile_for_shape, l2_flush_buffer, time_call

    make = torch_reference.builders(torch)
    flush = l2_flush_buffer(torch)
    peak_gbps = max((r.get("peak_gbps") or 0) for r in lab_records) or None
    rows = []
    configs = configurations(lab_records)
    for i, ((op, b, s, d), nbytes) in enumerate(sorted(configs.items())):
        shape = lab_shape(op, b, s, d)
        # Each mode compiled for this shape alone, inputs at static addresses (compile_for_shape).
        callables = [("torch eager", lambda: make[op](shape))] + [
            ("torch.compile " + m, lambda m=m: compile_for_shape(torch, make[op](shape), m)) for m in modes]
        for name, build in callables:
            fn = build()
            try:
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                ms = time_call(torch, fn, flush, reps).median_ms
                peak_mb = (torch.cuda.max_memory_allocated() - base) / 2**20
                status = "ok"
            except torch.cuda.OutOfMemoryError:
                ms, peak_mb, status = None, None, "OOM"
            gbps = nbytes / (ms * 1e-3) / 1e9 if ms else None
            rows.append({"operation": op, "implementation": name, "batch_size": b, "sequence_length": s,
                         "tensor_dimension": d, "time_ms": ms, "memory_mb": peak_mb, "status": status,
                         "inference_speed": 1000.0 / ms if ms else None, "throughput_gbps": gbps,
                         "gpu_efficiency": 100.0 * gbps / peak_gbps if gbps and peak_gbps else None,
                         "peak_gbps": peak_gbps})
        print("[%d/%d] %s %dx%dx%d: %s" % (i + 1, len(configs), op, b, s, d, ", ".join(
            "%s %s" % (r["implementation"], "%.4f ms" % r["time_ms"] if r["time_ms"] else r["status"])
            for r in rows[-len(callables):])), file=sys.stderr, flush=True)
        torch.cuda.empty_cache()
    return rows


def markdown(lab_records, torch_records, sources):
    """A Markdown table, a row a configuration: the lab's final optimized program (optimized_<op>,
    the one whose arithmetic is PyTorch's operator's: optimized_gelu, not the tanh form), PyTorch
    eager and torch.compile in each mode timed, and the lab's speedup over the fastest of them.
    Starts "Measured by `" (tools/update_readme_results.py --section takes it)."""
    lab = {}
    for r in lab_records:
        if r.get("time_ms") and r.get("program") == "optimized_" + r["operation"]:
            lab[(r["operation"], r["batch_size"], r["sequence_length"], r["tensor_dimension"])] = r["time_ms"]
    torch_ms, modes = {}, set()
    for r in torch_records:
        key = (r["operation"], r["batch_size"], r["sequence_length"], r["tensor_dimension"])
        impl = r.get("implementation", "")
        if impl == "torch eager" or str(impl).startswith("torch.compile"):
            torch_ms[(impl, key)] = r.get("time_ms")
            if impl != "torch eager":
                modes.add(impl)
    order = ["torch.compile " + m for m in COMPILE_MODES]
    modes = sorted(modes, key=lambda m: (order.index(m) if m in order else len(order), m))
    columns = ["torch eager"] + modes
    fmt = lambda ms: "%.4f" % ms if ms else "-"
    short = lambda c: "eager" if c == "torch eager" else c[len("torch.compile "):] if c in order else c
    lines = ["Measured by `demo_sweep_report` (the lab) and `tools/torch_sweep.py` (PyTorch: %s; %s): "
             "median ms of calls each after an L2 flush, CUDA events; the lab's final optimized program a "
             "topic." % (", ".join(modes) or "no torch.compile rows", "; ".join(sources)), "",
             "| operation | batch x seq x dim | lab ms | %s | PyTorch's fastest | lab speedup over it |"
             % " | ".join(("PyTorch eager" if c == "torch eager" else c) + " ms" for c in columns),
             "| --- | --- | ---: |%s --- | ---: |" % (" ---: |" * len(columns))]
    for key in sorted(lab):
        op, b, s, d = key
        times = [torch_ms.get((c, key)) for c in columns]
        timed = [(t, c) for t, c in zip(times, columns) if t]
        best, fastest = min(timed) if timed else (0, None)
        lines.append("| %s | %dx%dx%d | %s | %s | %s | %s |" % (
            op, b, s, d, fmt(lab[key]), " | ".join(fmt(t) for t in times), short(fastest) if fastest else "-",
            "%.2fx" % (best / lab[key]) if best else "-"))
    return "\n".join(lines) + "\n"


def load_records(path, what):
    with open(path) as f:
        records = json.load(f)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError("%s is not a JSON array of records (%s)" % (path, what))
    return records


def main():
    ap = argparse.ArgumentParser(prog="torch_sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", help="demo_sweep_report --json's file")
    ap.add_argument("--out", required=True, help="the merged records, in the users' names")
    ap.add_argument("--torch", metavar="TORCH.json", help="PyTorch's rows saved by --json-torch: merge, no timing")
    ap.add_argument("--json-torch", metavar="FILE", help="also keep PyTorch's rows here")
    ap.add_argument("--mode", default="default",
                    help="torch.compile's mode, or several, comma-separated: default, reduce-overhead, "
                         "max-autotune (default: default)")
    ap.add_argument("--reps", type=int, default=10, help="timed calls a configuration (default 10)")
    ap.add_argument("--markdown", metavar="FILE",
                    help="also write a table (the lab's final optimized program, PyTorch eager and compiled) here")
    a = ap.parse_args()
    if a.reps < 1:
        print("torch_sweep: error: --reps must be at least 1", file=sys.stderr)
        return 2
    modes = a.mode.split(",")
    bad = [m for m in modes if m not in COMPILE_MODES]
    if bad or len(set(modes)) != len(modes):
        print("torch_sweep: error: --mode %s: each one of %s, once" % (a.mode, ", ".join(COMPILE_MODES)),
              file=sys.stderr)
        return 2
    for path in (a.out, a.json_torch, a.markdown):
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not os.path.isdir(folder):
            print("torch_sweep: error: %s: no such folder" % path, file=sys.stderr)
            return 2
    try:
        lab = load_records(a.sweep, "demo_sweep_report --json")
        if a.torch:
            rows = load_records(a.torch, "torch_sweep --json-torch")
        else:
            import torch_gpt2

            torch = torch_gpt2.cuda_torch("torch_sweep")
            if torch is None:
                return 2
            rows = time_torch(torch, lab, modes, a.reps)
            if a.json_torch:
                with open(a.json_torch, "w") as f:
                    json.dump(rows, f, indent=1)
        merged, left_out = merge(lab, rows)
    except (OSError, ValueError, KeyError, TypeError) as err:
        print("torch_sweep: error: %s" % err, file=sys.stderr)
        return 2
    with open(a.out, "w") as f:
        json.dump(merged, f, indent=1)
    if a.markdown:
        sources = ["the lab's records from %s" % os.path.basename(a.sweep)]
        if a.torch:
            sources.append("PyTorch's from %s" % os.path.basename(a.torch))
        with open(a.markdown, "w") as f:
            f.write(markdown(lab, rows, sources))
    print("torch_sweep: %d records (of %d the lab's and %d PyTorch's; %d without a time left out) in %s"
          % (len(merged), len(lab), len(rows), left_out, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
