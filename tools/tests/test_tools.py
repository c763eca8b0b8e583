"""Tests of the scripts in tools/ (run by CTest: python3 -m unittest discover -s tools/tests)."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import update_readme_results as urr  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_section(path, name):
    """The text between a README's <!-- results:NAME:begin --> and <!-- results:NAME:end -->,
    stripped (an AssertionError naming the file when a marker is missing)."""
    with open(path) as f:
        text = f.read()
    begin, end = "<!-- results:%s:begin -->" % name, "<!-- results:%s:end -->" % name
    assert begin in text and end in text, "%s has no section %s" % (path, name)
    return text[text.index(begin) + len(begin):text.index(end)].strip()

README = "# Chapter\n\ntext\n\n<!-- results:begin -->\nold table\n<!-- results:end -->\n\nafter\n"
RESULTS = "Measured by `compare` on Some GPU.\n\n| topic | shape |\n| --- | --- |\n| t | 1x1 |\n"

RUN = {
    "tool": "cuda-perf-lab compare",
    "date": "2026-11-22 06:00 UTC",
    "device": {"name": "Some GPU", "driver": "13.0"},
    "programs": [
        {"program": "baseline_t", "topic": "t", "role": "baseline", "step": 1000, "folder": "ch01_basics",
         "shapes": [{"shape": "8x8", "median_s": 2e-6}, {"shape": "16x16", "median_s": 8e-6}]},
        {"program": "optimized_t", "topic": "t", "role": "optimized", "step": 1000, "folder": "ch01_basics",
         "shapes": [{"shape": "8x8", "median_s": 1e-6}, {"shape": "16x16", "median_s": 2e-6}]},
    ],
    "rows": [
        {"kind": "vs baseline", "variant": "optimized_t", "topic": "t", "shape": "8x8", "speedup": 2.0, "ci95": [1.9, 2.1]},
        {"kind": "vs baseline", "variant": "optimized_t", "topic": "t", "shape": "16x16", "speedup": 4.0, "ci95": [3.8, 4.2]},
    ],
}


class UpdateReadme(unittest.TestCase):
    def test_replaces_only_between_markers(self):
        new = urr.update(README, RESULTS)
        self.assertNotIn("old table", new)
        self.assertIn("| t | 1x1 |", new)
        self.assertTrue(new.startswith("# Chapter\n\ntext\n\n<!-- results:begin -->\nMeasured by"))
        self.assertTrue(new.endswith("<!-- results:end -->\n\nafter\n"))
        self.assertEqual(urr.update(new, RESULTS), new)  # idempotent

    def test_refuses_tables_not_written_by_compare(self):
        with self.assertRaises(ValueError):
            urr.update(README, "| typed | by hand |\n")

    def test_refuses_a_readme_without_markers(self):
        with self.assertRaises(ValueError):
            urr.update("# no markers\n", RESULTS)

    def test_refuses_an_unfinished_run(self):
        # compare writes its files after each round; one whose run never finished says so in its
        # first line, and no README table is made from it.
        first, rest = RESULTS.split("\n", 1)
        unfinished = first.rstrip(".") + "; UNFINISHED: 1 of the 4 rounds asked for (written while the run was under way).\n" + rest
        with self.assertRaises(ValueError) as cm:
            urr.update(README, unfinished)
        self.assertIn("UNFINISHED", str(cm.exception))
        urr.update(README, RESULTS)  # the same file, finished, is taken


class UpdateReadmeSection(unittest.TestCase):
    def test_a_named_section_takes_a_demos_table_and_leaves_the_other(self):
        readme = ("a\n<!-- results:begin -->\nold compare\n<!-- results:end -->\n"
                  "<!-- results:attention:begin -->\nold\n<!-- results:attention:end -->\nz\n")
        out = urr.update(readme, "Measured by `demo_attention_report` on X\n| t |", "attention")
        self.assertIn("old compare", out)
        self.assertIn("| t |", out)
        self.assertNotIn("\nold\n", out)
        with self.assertRaises(ValueError):
            urr.update(readme, "no stamp", "attention")
        with self.assertRaises(ValueError):
            urr.update(readme, "Measured by `demo_x`", "missing")


@unittest.skipIf(importlib.util.find_spec("matplotlib") is None, "matplotlib is not installed")
class Plot(unittest.TestCase):
    def test_writes_png_and_svg(self):
        import plot_compare

        with tempfile.TemporaryDirectory() as d:
            written = plot_compare.plot(RUN, d)
            names = sorted(os.path.basename(p) for p in written)
            self.assertEqual(names, ["speedup_ch01_basics.png", "speedup_ch01_basics.svg", "time_t.png", "time_t.svg"])
            for p in written:
                self.assertGreater(os.path.getsize(p), 1000)

    def test_rejects_other_json(self):
        import plot_compare

        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"benchmarks": []}, f)
        with self.assertRaises(ValueError):
            plot_compare.load(f.name)
        os.unlink(f.name)


ROOFLINE = {
    "tool": "cuda-perf-lab roofline",
    "device": "Fake GPU",
    "ceilings": {"copy_gbs": 3000, "fp32_tflops": 60, "sgemm_tflops": 50, "tf32_tflops": 400, "bf16_tflops": 750},
    "points": [
        {"name": "saxpy", "flop_per_byte": 1 / 6, "gbs": 2900, "tflops": 0.48, "percent_of_roof": 96.7},
        {"name": "transpose", "flop_per_byte": 0, "gbs": 2850, "tflops": 0, "percent_of_roof": 95.0},
        {"name": "sgemm", "flop_per_byte": 1365, "gbs": 36, "tflops": 50, "percent_of_roof": 83.3},
    ],
}


@unittest.skipIf(importlib.util.find_spec("matplotlib") is None, "matplotlib is not installed")
class PlotRoofline(unittest.TestCase):
    def test_writes_png_and_svg(self):
        import plot_roofline

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            with open(path, "w") as f:
                json.dump(ROOFLINE, f)
            written = plot_roofline.plot(plot_roofline.load(path), d)
            self.assertEqual(sorted(os.path.basename(p) for p in written), ["roofline.png", "roofline.svg"])
            for p in written:
                self.assertGreater(os.path.getsize(p), 1000)
            with open(os.path.join(d, "roofline.svg")) as f:
                svg = f.read()
            self.assertIn("transpose", svg)  # the bandwidth-only kernel is listed in the key

    def test_rejects_other_json(self):
        import plot_roofline

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.json")
            with open(path, "w") as f:
                json.dump({"tool": "cuda-perf-lab compare"}, f)
            with self.assertRaises(ValueError):
                plot_roofline.load(path)


SWEEP = [
    {"operation": "layernorm", "implementation": impl, "program": impl + "_layernorm", "batch_size": 32,
     "sequence_length": seq, "tensor_dimension": dim, "time_ms": t, "memory_mb": 1.0, "inference_speed": 1000 / t,
     "gpu_efficiency": 50.0, "throughput_gbps": 1500.0, "peak_gbps": 3000.0, "verified": True, "status": "ok"}
    for impl, scale in (("baseline", 2.0), ("optimized", 1.0))
    for seq in (512, 2048)
    for dim, t in ((8, 0.01 * scale), (768, 0.05 * scale), (4096, 0.2 * scale))
] + [
    {"operation": "mse", "implementation": "baseline", "program": "baseline_mse", "batch_size": 128,
     "sequence_length": 2048, "tensor_dimension": 4096, "time_ms": None, "memory_mb": None,
     "inference_speed": None, "gpu_efficiency": None, "throughput_gbps": None, "peak_gbps": 3000.0,
     "verified": False, "status": "OOM"},
]


@unittest.skipIf(importlib.util.find_spec("matplotlib") is None, "matplotlib is not installed")
class PlotSweep(unittest.TestCase):
    def test_one_figure_per_operation_with_a_line_per_program_and_tokens(self):
        import plot_sweep

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.json")
            with open(path, "w") as f:
                json.dump(SWEEP, f)
            written = plot_sweep.plot(plot_sweep.load(path), d)
            # mse has only an OOM record: no figure for it
            self.assertEqual(sorted(os.path.basename(p) for p in written), ["sweep_layernorm.png", "sweep_layernorm.svg"])
            with open(os.path.join(d, "sweep_layernorm.svg")) as f:
                svg = f.read()
            for label in ("baseline_layernorm, 32x512", "optimized_layernorm, 32x2048"):
                self.assertIn(label, svg)

    def test_rejects_other_json(self):
        import plot_sweep

        with tempfile.TemporaryDirectory() as d:
            for bad in ({"tool": "cuda-perf-lab compare"}, [], [{"operation": "gelu"}]):
                path = os.path.join(d, "x.json")
                with open(path, "w") as f:
                    json.dump(bad, f)
                with self.assertRaises(ValueError):
                    plot_sweep.load(path)


class TorchReference(unittest.TestCase):
    def run_tool(self, *args):
        import subprocess

        tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_reference.py")
        return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)

    def test_a_program_that_does_not_exist_is_exit_2_with_one_line(self):
        r = self.run_tool("/no/such/program")
        self.assertEqual(r.returncode, 2)
        self.assertIn("torch_reference: error:", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_reps_below_one_is_exit_2(self):
        r = self.run_tool("--reps", "0", "/bin/true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--reps", r.stderr)

    def test_an_unknown_mode_is_exit_2_naming_modes(self):
        r = self.run_tool("--modes", "eager,fastest", "/bin/true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--modes", r.stderr)
        self.assertIn("reduce-overhead", r.stderr)  # the message lists the modes it knows
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_known_modes_pass_the_modes_check(self):
        r = self.run_tool("--modes", "eager,default,reduce-overhead,max-autotune", "/no/such/program")
        self.assertEqual(r.returncode, 2)  # the program cannot be described: a later check
        self.assertNotIn("--modes", r.stderr)

    def test_from_without_lab_is_exit_2_with_one_line(self):
        r = self.run_tool("--from", "/no/such.json")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)
        self.assertIn("--lab", r.stderr)


class FakeCuda:
    """torch.cuda's memory statistics, as the caching allocator keeps them."""

    def __init__(self):
        self.allocated = self.peak = 0

    def alloc(self, n):
        self.allocated += n
        self.peak = max(self.peak, self.allocated)

    def free(self, n):
        self.allocated -= n

    def reset_peak_memory_stats(self):
        self.peak = self.allocated

    def memory_allocated(self):
        return self.allocated

    def max_memory_allocated(self):
        return self.peak


class PeakSince(unittest.TestCase):
    def setUp(self):
        import types

        import torch_reference

        self.cuda = FakeCuda()
        self.torch = types.SimpleNamespace(cuda=self.cuda)
        self.PeakSince = torch_reference.PeakSince

    def test_what_an_earlier_phase_allocated_for_the_next_counts(self):
        mib = 2**20
        self.cuda.alloc(100 * mib)  # before the model: not counted
        peak = self.PeakSince(self.torch)
        self.cuda.alloc(500 * mib)  # the model's parameters
        self.cuda.alloc(2000 * mib)  # phase 2's graphs and their pool, kept by the model
        self.cuda.free(1500 * mib)  # what phase 2's own calls freed
        self.assertEqual(peak.mib(), 2500)
        self.cuda.alloc(100 * mib)  # phase 3: the optimizer's state, little of its own
        self.assertEqual(peak.mib(), 2500)  # not 1100: the pool phase 3 runs in is counted
        self.cuda.alloc(2000 * mib)
        self.assertEqual(peak.mib(), 3100)


class RunSeed002(unittest.TestCase):
    def run_tool(self, *args):
        import subprocess

        tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "run_seed002.sh")
        return subprocess.run(["bash", tool, *args], capture_output=True, text=True)

    def test_part_a_is_the_users_attention_grid(self):
        r = self.run_tool("--dry-run", "--build", "/b", "--out", "/o", "a")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(len(lines), 1)
        for text in ("/b/ch04_compile_vs_fused/demo_attention_report", "--batch 8", "--d 16,32,64,128",
                     "--seq 256,1024,4096,8192,16384", "--warmup 10 --reps 100",
                     "--csv /o/compiled_attention_benchmark.csv"):
            self.assertIn(text, lines[0])

    def test_all_runs_both_parts_in_order_with_the_reports_extra_arguments(self):
        r = self.run_tool("--dry-run", "all", "--variants", "vanilla,compiled")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(len(lines), 2)
        self.assertIn("demo_attention_report", lines[0])
        self.assertIn("demo_gpt2_report", lines[1])
        self.assertIn("--sizes small,medium,large,xl,2.7B --contexts 128,256,512,1024 --batch 4 --warmup 5 --reps 10",
                      lines[1])
        self.assertTrue(all(line.endswith("--variants vanilla,compiled") for line in lines))

    def test_help_is_the_comment_and_no_code(self):
        r = self.run_tool("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("The users' torch.compile benchmark"), r.stdout[:80])
        self.assertIn("--resume", r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith("usage of this script."), r.stdout[-80:])
        self.assertNotIn("set -u", r.stdout)

    # A stand-in for demo_gpt2_report: a share (--configs) writes a CSV row a configuration, naming
    # the GPU it was given (or fails with FAIL_ON's exit status when that GPU is the one); the
    # final call (--resume, no --configs) prints its arguments and the merged file.
    FAKE_REPORT = """#!/bin/bash
args="$*"; csv=""; configs=""
while [ $# -gt 0 ]; do case $1 in --csv) csv=$2; shift;; --configs) configs=$2; shift;; esac; shift; done
if [ -n "$configs" ]; then
  [ "${FAIL_ON:-}" = "$CUDA_VISIBLE_DEVICES" ] && exit 1
  echo model_size,context_length,gpu > "$csv"
  IFS=, read -ra cs <<< "$configs"
  for c in "${cs[@]}"; do echo "${c%%:*},${c#*:},$CUDA_VISIBLE_DEVICES" >> "$csv"; done
else
  echo "final: $args"; cat "$csv"
fi
"""

    def with_fake_report(self, env_extra, *args):
        import subprocess

        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "b", "ch04_compile_vs_fused"))
            fake = os.path.join(d, "b", "ch04_compile_vs_fused", "demo_gpt2_report")
            with open(fake, "w") as f:
                f.write(self.FAKE_REPORT)
            os.chmod(fake, 0o755)
            tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "run_seed002.sh")
            env = dict(os.environ, **env_extra)
            return subprocess.run(["bash", tool, "--build", os.path.join(d, "b"), "--out", os.path.join(d, "o"),
                                   *args], capture_output=True, text=True, env=env)

    def test_gpus_share_part_b_and_merge_it_in_grid_order(self):
        r = self.with_fake_report({}, "--gpus", "3", "b", "--variants", "vanilla,fused", "--resume")
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        shares = [line for line in r.stdout.splitlines() if line.startswith("== part b, GPU ")]
        self.assertEqual(len(shares), 3)
        seen = []
        for i, line in enumerate(shares):
            self.assertIn("CUDA_VISIBLE_DEVICES=%d " % i, line)
            self.assertIn("--resume", line)  # each share resumes its own file
            seen += line.split("--configs ")[1].split(" ")[0].split(",")
        grid = ["%s:%d" % (s, c) for s in ("small", "medium", "large", "xl", "2.7B") for c in (128, 256, 512, 1024)]
        self.assertEqual(sorted(seen), sorted(grid))  # every configuration once
        final = r.stdout.split("final: ")[1].splitlines()
        self.assertEqual(final[0].split().count("--resume"), 1)
        self.assertIn("--variants vanilla,fused", final[0])
        rows = final[2:22]
        self.assertEqual(final[1], "model_size,context_length,gpu")
        self.assertEqual([",".join(row.split(",")[:2]) for row in rows], [g.replace(":", ",") for g in grid])
        self.assertEqual(len({row.split(",")[2] for row in rows}), 3)  # all three GPUs measured some

    def test_a_failing_share_stops_before_the_merge(self):
        r = self.with_fake_report({"FAIL_ON": "1"}, "--gpus", "2", "b")
        self.assertEqual(r.returncode, 1)
        self.assertNotIn("final:", r.stdout)
        self.assertIn("a share of part b failed (exit 1)", r.stderr)

    def test_bad_usage_is_exit_2_with_one_line(self):
        for args in (["c"], [], ["--out"], ["--fast", "a"], ["--gpus", "0", "b"], ["--gpus", "x", "b"], ["--gpus"]):
            r = self.run_tool(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, args)
            self.assertTrue(r.stderr.startswith("run_seed002: "), args)

    def test_a_report_not_built_is_named_and_nothing_runs(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_tool("--build", d, "--out", os.path.join(d, "out"), "b")
            self.assertEqual(r.returncode, 2)
            self.assertIn("demo_gpt2_report", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "out")))


class NsightRecipes(unittest.TestCase):
    """tools/nsight_systems.sh and nsight_compute.sh with a stand-in profiler (it runs the program
    with the arguments it was given and records them): a lab program gets --no-check and one
    repetition, a demo (which refuses them) only its own arguments."""

    def setUp(self):
        import tempfile

        self.dir = tempfile.mkdtemp()
        self.record = os.path.join(self.dir, "args.txt")
        self.tools = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.profiler = self.script("profiler", """#!/usr/bin/env python3
import os, subprocess, sys
a = sys.argv[1:]
if a[0] == "stats" or "--import" in a:
    print("  kernel x Context 1")
    sys.exit(0)
o = a.index("-o")
with open(os.environ["FAKE_RECORD"], "w") as f:
    f.write("\\n".join(a[o + 3:]))
sys.exit(subprocess.call(a[o + 2:]))
""")
        self.program = self.script("optimized_fake", """#!/usr/bin/env bash
[ "${1:-}" = "--help" ] && { echo "  --benchmark_repetitions=N  ..."; exit 0; }
exit 0
""")
        self.demo = self.script("demo_fake", """#!/usr/bin/env bash
[ "${1:-}" = "--help" ] && { echo "  --reps N  timed runs"; exit 0; }
for a in "$@"; do case "$a" in --no-check|--benchmark*) echo "demo_fake: unknown flag $a" >&2; exit 2;; esac; done
exit 0
""")

    def tearDown(self):
        import shutil

        shutil.rmtree(self.dir)

    def script(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
        return path

    def run_recipe(self, recipe, program, *args):
        import subprocess

        env = dict(os.environ, NSYS=self.profiler, NCU=self.profiler, FAKE_RECORD=self.record)
        r = subprocess.run(["bash", os.path.join(self.tools, recipe), os.path.join(self.dir, "out"), program, *args],
                           capture_output=True, text=True, env=env)
        with open(self.record) as f:
            return r, f.read().split("\n")

    def test_a_demo_gets_only_its_own_arguments(self):
        for recipe in ("nsight_systems.sh", "nsight_compute.sh"):
            r, args = self.run_recipe(recipe, self.demo, "--reps", "1")
            self.assertEqual(r.returncode, 0, recipe + ": " + r.stderr)
            self.assertEqual(args, ["--reps", "1"], recipe)
            self.assertIn("own arguments only", r.stderr)

    def test_a_lab_program_gets_no_check_and_one_repetition(self):
        r, args = self.run_recipe("nsight_systems.sh", self.program, "--shape", "8x8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(args, ["--no-check", "--benchmark_repetitions=1", "--shape", "8x8"])
        r, args = self.run_recipe("nsight_compute.sh", self.program)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(args, ["--no-check", "--benchmark_repetitions=1", "--benchmark_min_time=0.01"])

    def test_help_is_the_header_without_code(self):
        import subprocess

        for recipe in ("nsight_systems.sh", "nsight_compute.sh"):
            r = subprocess.run(["bash", os.path.join(self.tools, recipe), "--help"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0)
            self.assertIn("OUTDIR PROGRAM", r.stdout)
            self.assertNotIn("set -u", r.stdout)


# The users' benchmark's analysis snippets (the course's operator benchmark guide), verbatim: they
# must run unchanged on torch_sweep's merged file.
SEED_SNIPPETS = ['''
import json

# Load results
with open('benchmark_results.json', 'r') as f:
    results = json.load(f)

# Filter by operation
layernorm_results = [r for r in results if r['operation'] == 'LayerNorm']

# Compare implementations
for impl in ['PyTorch', 'CUDA', 'Triton']:
    impl_results = [r for r in layernorm_results if r['implementation'] == impl]
    avg_time = sum(r['time_ms'] for r in impl_results) / len(impl_results)
    print(f"{impl} average time: {avg_time:.3f} ms")
''', '''
import json
with open('benchmark_results.json') as f:
    results = json.load(f)
# Filter results for specific batch sizes
batch_16 = [r for r in results if r['batch_size'] == 16]
batch_32 = [r for r in results if r['batch_size'] == 32]
batch_64 = [r for r in results if r['batch_size'] == 64]

# Compare performance
for batch_results in [batch_16, batch_32, batch_64]:
    avg_time = sum(r['time_ms'] for r in batch_results) / len(batch_results)
    print(f"Batch {batch_results[0]['batch_size']}: {avg_time:.3f} ms")
''', '''
import json
with open('benchmark_results.json') as f:
    results = json.load(f)

# Find fastest implementation for LayerNorm
layernorm = [r for r in results if r['operation'] == 'LayerNorm']
fastest = min(layernorm, key=lambda x: x['time_ms'])
print(f'Fastest LayerNorm: {fastest["implementation"]} ({fastest["time_ms"]:.3f} ms)')
''']


class TorchSweep(unittest.TestCase):
    """torch_sweep's merge on the committed full sweep (H100) with PyTorch rows made up here for
    each of its configurations (test input, not a measurement): the users' snippets run on it."""

    def setUp(self):
        import tempfile

        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import torch_sweep

        self.ts = torch_sweep
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.sweep = os.path.join(root, "ch03_kernels", "results", "sweep_full_h100.json")
        with open(self.sweep) as f:
            self.lab = json.load(f)
        self.torch_rows = []
        for (op, b, s, d), nbytes in torch_sweep.configurations(self.lab).items():
            for name, ms in (("torch eager", 0.05), ("torch.compile default", 0.04), ("torch eager", None)):
                self.torch_rows.append({"operation": op, "implementation": name, "batch_size": b,
                                        "sequence_length": s, "tensor_dimension": d, "time_ms": ms,
                                        "status": "ok" if ms else "OOM"})
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        import shutil

        shutil.rmtree(self.dir)

    def test_the_users_snippets_run_unchanged_on_the_merged_file(self):
        import contextlib
        import io

        merged, left_out = self.ts.merge(self.lab, self.torch_rows)
        self.assertEqual(left_out, len(self.torch_rows) // 3)  # the rows without a time
        self.assertEqual(len(merged), len(self.lab) + 2 * len(self.torch_rows) // 3)
        with open(os.path.join(self.dir, "benchmark_results.json"), "w") as f:
            json.dump(merged, f)
        out = io.StringIO()
        cwd = os.getcwd()
        try:
            os.chdir(self.dir)
            with contextlib.redirect_stdout(out):
                for snippet in SEED_SNIPPETS:
                    exec(snippet, {})
        finally:
            os.chdir(cwd)
        text = out.getvalue()
        for line in ("PyTorch average time", "CUDA average time", "Triton average time", "Batch 16:",
                     "Fastest LayerNorm: "):
            self.assertIn(line, text)

    def test_the_labs_own_names_are_kept(self):
        merged, _ = self.ts.merge(self.lab, self.torch_rows)
        self.assertEqual({r["operation"] for r in merged}, {"LayerNorm", "GELU", "Swish", "Loss"})
        self.assertEqual({r["loss"] for r in merged if r["operation"] == "Loss"}, {"mse", "cross_entropy"})
        cuda = [r for r in merged if r["implementation"] == "CUDA"]
        self.assertTrue(cuda and all(r["lab_implementation"] == "optimized" for r in cuda))
        self.assertTrue(all(r["program"].startswith("optimized_") for r in cuda))
        triton = [r for r in merged if r["implementation"] == "Triton"]
        self.assertTrue(triton and all("torch.compile" in r["source"] for r in triton))

    def test_a_record_it_cannot_name_is_an_error(self):
        with self.assertRaises(ValueError):
            self.ts.merge([dict(self.lab[0], operation="softmax")], [])
        with self.assertRaises(ValueError):
            self.ts.merge(self.lab[:1], [dict(self.torch_rows[0], implementation="jax")])

    def test_the_command_line_merges_saved_rows_and_refuses_bad_input(self):
        import subprocess

        tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_sweep.py")
        saved, out = os.path.join(self.dir, "torch.json"), os.path.join(self.dir, "merged.json")
        with open(saved, "w") as f:
            json.dump(self.torch_rows, f)
        r = subprocess.run([sys.executable, tool, self.sweep, "--torch", saved, "--out", out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            self.assertEqual(len(json.load(f)), len(self.lab) + 2 * len(self.torch_rows) // 3)
        r = subprocess.run([sys.executable, tool, self.sweep, "--torch", saved, "--out", "/no/such/dir/m.json"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such folder", r.stderr)
        r = subprocess.run([sys.executable, tool, saved + ".missing", "--torch", saved, "--out", out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)


class TorchSweepMeasured(unittest.TestCase):
    """The measured merge (H100, 2026-11-27): the lab's default sweep and PyTorch's rows of it, as
    committed in ch03_kernels/results, merge into a file the users' snippets run on, and the README's
    table is what --markdown writes from them."""

    def setUp(self):
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import torch_sweep

        self.ts = torch_sweep
        self.root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        results = os.path.join(self.root, "ch03_kernels", "results")
        self.lab = self.ts.load_records(os.path.join(results, "sweep_vs_torch_h100.json"), "sweep")
        self.torch_rows = self.ts.load_records(os.path.join(results, "sweep_torch_h100.json"), "torch rows")

    def test_every_configuration_has_pytorch_eager_and_compiled(self):
        merged, left_out = self.ts.merge(self.lab, self.torch_rows)
        self.assertEqual(left_out, 0)
        configs = set(self.ts.configurations(self.lab))
        for impl in ("PyTorch", "Triton"):
            have = {(r["lab_operation"], r["batch_size"], r["sequence_length"], r["tensor_dimension"])
                    for r in merged if r["implementation"] == impl and r["time_ms"] > 0}
            self.assertEqual(have, configs, impl)

    def test_the_users_snippets_run_on_the_measured_merge(self):
        import contextlib
        import io

        merged, _ = self.ts.merge(self.lab, self.torch_rows)
        out = io.StringIO()
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "benchmark_results.json"), "w") as f:
                json.dump(merged, f)
            cwd = os.getcwd()
            try:
                os.chdir(d)
                with contextlib.redirect_stdout(out):
                    # The first and third; the second averages batches 16 and 64, which the default
                    # subset (batch 32) does not have (it runs on the full sweep, above).
                    for snippet in (SEED_SNIPPETS[0], SEED_SNIPPETS[2]):
                        exec(snippet, {})
            finally:
                os.chdir(cwd)
        for line in ("PyTorch average time", "CUDA average time", "Triton average time", "Fastest LayerNorm: "):
            self.assertIn(line, out.getvalue())

    def test_the_readme_table_is_the_tools_markdown(self):
        md = self.ts.markdown(self.lab, self.torch_rows, ["the lab's records from sweep_vs_torch_h100.json",
                                                          "PyTorch's from sweep_torch_h100.json"])
        self.assertTrue(md.startswith("Measured by `"))
        rows = [l for l in md.splitlines() if l.startswith("| ") and not l.startswith(("| operation", "| ---"))]
        self.assertEqual(len(rows), len(self.ts.configurations(self.lab)))
        # GELU's row is the erf program's (optimized_gelu), not the tanh form's.
        erf = {r["tensor_dimension"]: r["time_ms"] for r in self.lab if r["program"] == "optimized_gelu"
               and r["batch_size"] == 32 and r["sequence_length"] == 512}
        self.assertIn("| gelu | 32x512x512 | %.4f |" % erf[512], md)
        self.assertEqual(readme_section(os.path.join(self.root, "ch03_kernels", "README.md"), "sweep-pytorch"),
                         md.strip())


class ResultTablesInReadmes(unittest.TestCase):
    """A README's measured table that a tool wrote as a file is that file, as committed (never
    typed): planted_bugs.sh --scales's sensitivity.md in the top README, torch_ops_bench.py's and
    torch_gpt2_lab.py's --markdown in python/README.md, demo_gpt2_report's tables of the users' grid
    in the GPT-2 README."""

    TABLES = [  # README, section, the results file (paths from the repository's root)
        ("README.md", "sensitivity", "ch04_compile_vs_fused/results/planted_sensitivity_h200.md"),
        ("README.md", "sensitivity-h100", "ch04_compile_vs_fused/results/planted_sensitivity_h100.md"),
        ("python/README.md", "ops", "python/results/ops_h100.md"),
        ("python/README.md", "ops-strided", "python/results/ops_strided_h100.md"),
        ("python/README.md", "ops-hopper", "python/results/ops_hopper_h200.md"),
        ("python/README.md", "ops-bf16", "python/results/ops_bf16_h200.md"),
        ("python/README.md", "dropin", "python/results/gpt2_dropin_h100.md"),
        ("python/README.md", "dropin-bf16", "python/results/gpt2_dropin_bf16_h200.md"),
        ("python/README.md", "ops-attention16", "python/results/ops_attention16_h200.md"),
        ("python/README.md", "ops-layernorm16", "python/results/ops_layernorm16_h200.md"),
        ("python/README.md", "ops-attention-persistent", "python/results/ops_attention_persistent_h200.md"),
        ("python/README.md", "ops-attention-o16", "python/results/ops_attention_o16_h200.md"),
        ("python/README.md", "ops-attention-kv16", "python/results/ops_attention_kv16_h200.md"),
        ("python/README.md", "ops-layernorm16-s63", "python/results/ops_layernorm16_s63_h200.md"),
        ("python/README.md", "ops-attention-turns", "python/results/ops_attention_turns_h200.md"),
        ("python/README.md", "ops-attention-wide", "python/results/ops_attention_wide_h200.md"),
        ("ch04_compile_vs_fused/gpt2/README.md", "seed002-h200",
         "ch04_compile_vs_fused/results/seed002_h200/compiled_transformer_benchmark.md"),
        ("ch04_compile_vs_fused/attention/README.md", "seed002-a-h200",
         "ch04_compile_vs_fused/results/seed002_h200/compiled_attention_benchmark.md"),
        ("README.md", "sensitivity-bf16-steps", "ch04_compile_vs_fused/results/planted_sensitivity_bf16_steps_h200.md"),
        ("ch04_compile_vs_fused/attention/hopper/README.md", "persistent-h200",
         "ch04_compile_vs_fused/results/attention_persistent_h200/table.md"),
    ]

    def test_each_section_is_its_results_file(self):
        for readme, section, name in self.TABLES:
            with open(os.path.join(REPO, name)) as f:
                table = f.read()
            self.assertEqual(readme_section(os.path.join(REPO, readme), section), table.strip(), name)
            self.assertTrue(table.startswith(("Measured by `tools/", "Measured by `demo_")), name)

    # compare's tables of the 16-bit ch03 topics, as written by compare --markdown (or by compare
    # --replay of several runs' JSON merged, its first line naming the commands).
    COMPARE_TABLES = [("ch03_kernels/README.md", section, "ch03_kernels/results/" + name) for section, name in (
        ("activations-bf16", "activations_bf16_h200.md"), ("activations-fp16", "activations_fp16_h200.md"),
        ("layernorm-bf16", "layernorm_bf16_h200.md"), ("layernorm-fp16", "layernorm_fp16_h200.md"),
        ("layernorm-backward-bf16", "layernorm_backward_bf16_h200.md"),
        ("layernorm-backward-fp16", "layernorm_backward_fp16_h200.md"),
        ("cross-entropy-backward-fp16", "cross_entropy_backward_fp16_h200.md"),
        ("cross-entropy-16bit", "cross_entropy_16bit_h200.md"))]

    def test_each_compare_section_is_its_results_file(self):
        for readme, section, name in self.COMPARE_TABLES:
            with open(os.path.join(REPO, name)) as f:
                table = f.read()
            self.assertEqual(readme_section(os.path.join(REPO, readme), section), table.strip(), name)
            self.assertTrue(table.startswith("Measured by `compare"), name)
            self.assertIn("| topic | shape | variant | compared with |", table, name)

    def test_sensitivity_rows_are_the_tools(self):
        """Each row: a bug, its program, a cell a scale, the smallest scale caught."""
        for _, section, name in self.TABLES:
            if not section.startswith("sensitivity"):
                continue
            with open(os.path.join(REPO, name)) as f:
                table = f.read()
            self.assertTrue(table.startswith("Measured by `tools/planted_bugs.sh --scales "), name)
            rows = [l for l in table.splitlines() if l.startswith("| ") and not l.startswith(("| bug ", "| ---"))]
            self.assertGreater(len(rows), 0, name)
            for row in rows:
                cells = [c.strip() for c in row.strip("|").split("|")]
                self.assertEqual(len(cells), 5, row)  # bug, program, two scales, smallest caught
                self.assertRegex(cells[-1], r"^(1\.00[0-9]+|-|none)$", row)


class TorchSweepModes(unittest.TestCase):
    """--mode takes several torch.compile modes; the table gives each its column and sets the lab
    against the fastest of them all (a peer's best configuration)."""

    def setUp(self):
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import torch_sweep

        self.ts = torch_sweep
        self.tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_sweep.py")
        self.sweep = os.path.join(os.path.dirname(self.tool), "..", "ch03_kernels", "results", "sweep_h100.json")

    def test_the_fastest_mode_is_the_yardstick(self):
        lab = [{"operation": "gelu", "program": "optimized_gelu", "batch_size": 2, "sequence_length": 3,
                "tensor_dimension": 4, "time_ms": 1.0}]
        key = {"operation": "gelu", "batch_size": 2, "sequence_length": 3, "tensor_dimension": 4}
        rows = [dict(key, implementation="torch eager", time_ms=2.0),
                dict(key, implementation="torch.compile default", time_ms=1.5),
                dict(key, implementation="torch.compile reduce-overhead", time_ms=0.8)]
        md = self.ts.markdown(lab, rows, ["test rows"])
        self.assertIn("| PyTorch eager ms | torch.compile default ms | torch.compile reduce-overhead ms |", md)
        self.assertIn("| gelu | 2x3x4 | 1.0000 | 2.0000 | 1.5000 | 0.8000 | reduce-overhead | 0.80x |", md)
        # The modes' columns in their own order (default, reduce-overhead, max-autotune), whatever
        # the rows' order; the fastest named.
        rows.append(dict(key, implementation="torch.compile max-autotune", time_ms=0.5))
        md = self.ts.markdown(lab, list(reversed(rows)), ["test rows"])
        self.assertIn("| torch.compile default ms | torch.compile reduce-overhead ms | torch.compile max-autotune ms |", md)
        self.assertIn("| 1.5000 | 0.8000 | 0.5000 | max-autotune | 0.50x |", md)

    def test_a_bad_mode_is_refused_before_torch(self):
        for bad in ("fast", "default,default", "default,"):
            r = subprocess.run([sys.executable, self.tool, self.sweep, "--mode", bad, "--out", os.devnull],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--mode", r.stderr)


class TorchOpsBenchModes(unittest.TestCase):
    """torch_ops_bench.py --compile-modes: every mode timed, the fastest the yardstick and named."""

    def setUp(self):
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import torch_ops_bench

        self.tob = torch_ops_bench
        self.tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_ops_bench.py")

    def test_a_bad_mode_is_refused_before_torch(self):
        for bad in ("fast", "default,default", ",", "max_autotune"):
            r = subprocess.run([sys.executable, self.tool, "--compile-modes", bad], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--compile-modes", r.stderr, bad)

    def test_the_fastest_mode_is_the_yardstick(self):
        row = {"op": "gelu_bf16", "shape": "16", "lab_ms": 1.0, "cpp_ms": 1.0, "lab_over_cpp": 1.0,
               "eager_ms": 2.0, "eager_over_lab": 2.0,
               "compile_modes_ms": {"default": 1.5, "max-autotune-no-cudagraphs": 0.8}}
        self.tob.fastest_compile(row)
        self.assertEqual((row["compile_mode"], row["compile_ms"]), ("max-autotune-no-cudagraphs", 0.8))
        row["compile_over_lab"] = row["compile_ms"] / row["lab_ms"]
        md = self.tob.markdown([row], ["default", "max-autotune-no-cudagraphs"], "GPU", "2.11", 20)
        self.assertIn("the fastest of the modes `default`, `max-autotune-no-cudagraphs`", md)
        self.assertIn("| 0.8 ms (max-autotune-no-cudagraphs) | 2.00x | 0.80x |", md)
        # One mode: the cell names none (the header says which).
        one = dict(row, compile_modes_ms={"default": 1.5})
        self.tob.fastest_compile(one)
        md = self.tob.markdown([one], ["default"], "GPU", "2.11", 20)
        self.assertIn("| 1.5 ms |", md)
        self.assertNotIn("(default)", md)

    def test_the_committed_bf16_table_is_its_json(self):
        """python/results/ops_bf16_h200.md is markdown() of the JSON beside it (its rows as timed)."""
        base = os.path.join(REPO, "python", "results", "ops_bf16_h200")
        with open(base + ".json") as f:
            run = json.load(f)
        modes = run.get("compile_modes") or sorted({m for r in run["rows"] for m in r.get("compile_modes_ms", {})},
                                                   key=self.tob.COMPILE_MODES.index)
        with open(base + ".md") as f:
            self.assertEqual(self.tob.markdown(run["rows"], modes, run["device"], run["torch"], run["reps"]), f.read())


class TorchSpin(unittest.TestCase):
    """time_call's spin before each call outlasts the call's CPU work (measured in the warm-up), so
    the events time the GPU's work and not waiting for launches; a fake torch records the spins."""

    def test_the_spin_is_twice_the_warm_calls_cpu_time_and_at_least_the_old_one(self):
        import torch_timing

        class Event:
            def __init__(self, **_):
                pass

            def record(self):
                pass

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return 1.0

        spins = []
        cuda = type("Cuda", (), {"synchronize": staticmethod(lambda: None), "Event": Event,
                                 "_sleep": staticmethod(spins.append)})
        torch = type("Torch", (), {"cuda": cuda})
        flush = type("Flush", (), {"sum": lambda self: None})()
        quick = torch_timing.time_call(torch, lambda: None, flush, 3)
        self.assertEqual(spins, [torch_timing.MIN_SPIN_CYCLES] * 3)
        self.assertAlmostEqual(quick.spin_us, 400_000 / 1980)
        spins.clear()
        slow = torch_timing.time_call(torch, lambda: time.sleep(0.002), flush, 2)  # 2 ms of CPU work
        self.assertGreaterEqual(slow.host_us, 2000)
        self.assertGreaterEqual(slow.spin_us, 2 * 2000)
        self.assertEqual(spins, [spins[0]] * 2)
        self.assertGreaterEqual(spins[0], 2 * 2000 * 1980)


class KernelTimes(unittest.TestCase):
    """torch_timing.kernel_times (torch_ops_bench.py --kernels): a call's kernels, us a call, the
    flush's own taken out (by position, else by name); a fake profiler records what a fake call launches."""

    def test_the_flush_is_taken_out_by_position(self):
        import torch_timing

        # Each round: the flush's sum, then the call. The flush after a call takes longer (12.4: it
        # writes back the call's lines); that is not the call's.
        both = [("reduce", 10.0), ("attn", 30.0), ("reduce", 12.4), ("attn", 31.0)]
        alone = [("reduce", 10.1), ("reduce", 10.3)]
        got = torch_timing.kernels_per_call(both, alone, 2)
        self.assertEqual(got, [("attn", 30.5)])
        # A kernel of the call's that shares the flush's name keeps its own time.
        both = [("reduce", 10.0), ("attn", 30.0), ("reduce", 4.0), ("reduce", 12.4), ("attn", 31.0), ("reduce", 4.2)]
        got = torch_timing.kernels_per_call(both, alone, 2)
        self.assertEqual([n for n, _ in got], ["attn", "reduce"])
        self.assertAlmostEqual(dict(got)["reduce"], 4.1)

    def test_uneven_rounds_fall_back_to_names(self):
        import torch_timing

        # A memset in one round only: the rounds cannot be cut by position; the flush's time alone
        # is subtracted by name.
        both = [("reduce", 10.0), ("attn", 30.0), ("memset", 1.0), ("reduce", 10.4), ("attn", 31.0)]
        alone = [("reduce", 10.1), ("reduce", 10.3)]
        got = torch_timing.kernels_per_call(both, alone, 2)
        self.assertEqual([n for n, _ in got], ["attn", "memset"])
        self.assertAlmostEqual(dict(got)["attn"], 30.5)
        self.assertAlmostEqual(dict(got)["memset"], 0.5)

    def test_kernel_times_profiles_the_call_after_each_flush(self):
        import torch_timing

        launched = []  # what the GPU runs: (name, us)
        # The flush's sum takes longer after a call (it writes back the call's lines), as on a GPU.
        flush = type("Flush", (), {"sum": lambda self: launched.append(
            ("reduce", 23.0 if launched and launched[-1][0] == "softmax" else 20.0))})()

        def call():
            launched.extend([("gemm", 5.0), ("reduce", 1.0), ("softmax", 2.0)])

        class Event:
            def __init__(self, name, us, start):
                self.name, self.device_type = name, "cuda"
                self.time_range = type("R", (), {"elapsed_us": lambda self, us=us: us, "start": start})()

        class Profile:
            def __init__(self, activities):
                pass

            def __enter__(self):
                launched.clear()
                return self

            def __exit__(self, *exc):
                return False

            def events(self):
                # out of launch order, as a profiler may list them; a call's reduce shares the flush's name
                return ([Event(n, us, t) for t, (n, us) in reversed(list(enumerate(launched)))]
                        + [type("Cpu", (), {"device_type": "cpu"})()])

        profiler = type("P", (), {"profile": Profile, "ProfilerActivity": type("A", (), {"CUDA": "cuda"})})
        torch = type("Torch", (), {"cuda": type("C", (), {"synchronize": staticmethod(lambda: None)}),
                                   "profiler": profiler,
                                   "autograd": type("AG", (), {"DeviceType": type("D", (), {"CUDA": "cuda"})})})
        got = torch_timing.kernel_times(torch, call, flush, 4)
        self.assertEqual(got, [("gemm", 5.0), ("softmax", 2.0), ("reduce", 1.0)])

    def test_a_negative_count_is_refused_before_torch(self):
        tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_ops_bench.py")
        r = subprocess.run([sys.executable, tool, "--kernels", "-1"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--kernels", r.stderr)


class CompileForShape(unittest.TestCase):
    """torch_timing.compile_for_shape, which torch_sweep and torch_reference share: dynamo reset
    first, the closure's tensors marked static, dynamic=False, the mode passed (None for default);
    a fake torch records the calls."""

    def test_reset_static_inputs_and_a_fixed_shape(self):
        import torch_timing

        calls = []

        class Tensor:
            pass

        dynamo = type("Dynamo", (), {"reset": staticmethod(lambda: calls.append("reset")),
                                      "mark_static_address": staticmethod(lambda t: calls.append(("static", t)))})
        torch = type("Torch", (), {"Tensor": Tensor, "_dynamo": dynamo,
                                   "compile": staticmethod(lambda fn, **kw: calls.append(("compile", kw)) or fn)})
        x, w, scale = Tensor(), Tensor(), 3.0
        fn = lambda: (x, w, scale)  # noqa: E731  (a builder's callable: its inputs in its closure)
        self.assertIs(torch_timing.compile_for_shape(torch, fn, "reduce-overhead"), fn)
        self.assertEqual(calls[0], "reset")
        self.assertEqual({id(c[1]) for c in calls if c[0] == "static"}, {id(x), id(w)})
        self.assertEqual(calls[-1], ("compile", {"mode": "reduce-overhead", "dynamic": False}))
        calls.clear()
        torch_timing.compile_for_shape(torch, fn)
        self.assertEqual(calls[-1], ("compile", {"mode": None, "dynamic": False}))


class TorchTiming(unittest.TestCase):
    """Where the tools look for cuda_perf_lab: python/ only when the package was built in place there
    (its compiled _C beside the sources); otherwise the installed one must not be hidden by sources
    that cannot import."""

    def path_after(self, built):
        import torch_timing

        with tempfile.TemporaryDirectory() as root:
            pkg = os.path.join(root, "python", "cuda_perf_lab")
            os.makedirs(pkg)
            if built:
                open(os.path.join(pkg, "_C.cpython-312-x86_64-linux-gnu.so"), "w").close()
            fake_sys = type("FakeSys", (), {"path": ["/somewhere"]})()
            saved, torch_timing.ROOT = torch_timing.ROOT, root
            try:
                torch_timing.put_bridge_on_path(fake_sys)
            finally:
                torch_timing.ROOT = saved
            return fake_sys.path, os.path.join(root, "python")

    def test_an_in_place_build_goes_first(self):
        path, folder = self.path_after(built=True)
        self.assertEqual(path, [folder, "/somewhere"])

    def test_sources_without_the_build_stay_off_the_path(self):
        path, _ = self.path_after(built=False)
        self.assertEqual(path, ["/somewhere"])

    def test_a_missing_package_is_one_line_and_none(self):
        import contextlib
        import io

        import torch_timing

        err = io.StringIO()
        saved = sys.modules.get("cuda_perf_lab")
        sys.modules["cuda_perf_lab"] = None  # import fails, as where the package is not built
        try:
            with contextlib.redirect_stderr(err):
                self.assertIsNone(torch_timing.import_bridge("some_tool.py"))
        finally:
            if saved is None:
                del sys.modules["cuda_perf_lab"]
            else:
                sys.modules["cuda_perf_lab"] = saved
        self.assertEqual(len(err.getvalue().strip().splitlines()), 1)
        self.assertIn("some_tool.py: error: cuda_perf_lab is not built", err.getvalue())


TORCH_RUN = {"tool": "cuda-perf-lab torch_reference", "device": "Some GPU", "torch": "2.x", "results": [
    {"topic": "t", "shape": "8x8", "implementation": "torch eager", "ms": 3.0},
    {"topic": "t", "shape": "8x8", "implementation": "SDPA", "ms": 1.0},
    {"topic": "t", "shape": "99x99", "implementation": "torch eager", "ms": 5.0},
]}
LAB_RUN = {"tool": "cuda-perf-lab compare", "date": "2026-11-22 06:00 UTC", "git_commit": "abc", "rows": [
    {"kind": "vs baseline", "topic": "t", "shape": "8x8", "variant": "optimized_t", "against": "baseline_t",
     "variant_median_s": 0.5e-3, "against_median_s": 2e-3, "status": "OK"},
    {"kind": "vs baseline", "topic": "t", "shape": "16x16", "variant": "optimized_t", "against": "baseline_t",
     "variant_median_s": 1e-3, "against_median_s": 4e-3, "status": "OK"},
]}


class TorchAgainstLab(unittest.TestCase):
    def setUp(self):
        import torch_reference

        self.tr = torch_reference

    def test_pairs_each_lab_variant_with_pytorch_at_the_shapes_both_timed(self):
        rows = self.tr.against_lab(TORCH_RUN, LAB_RUN)
        self.assertEqual([(r[2], r[3]) for r in rows], [("baseline_t", 2.0), ("optimized_t", 0.5)])
        optimized = dict((n, ratio) for n, _, ratio, _, _ in rows[1][4])
        self.assertAlmostEqual(optimized["torch eager"], 6.0)  # PyTorch's 3 ms over the lab's 0.5 ms
        self.assertAlmostEqual(optimized["SDPA"], 2.0)

    def test_markdown_is_accepted_by_update_readme_results_as_a_section(self):
        md = self.tr.render_against(TORCH_RUN, LAB_RUN, True)
        self.assertTrue(md.startswith("Measured by `torch_reference`"))
        self.assertIn("| t | 8x8 | `optimized_t` | 0.5 | 3 (6.00x) | 1 (2.00x) |", md)
        readme = "a\n<!-- results:pytorch:begin -->\nold\n<!-- results:pytorch:end -->\n"
        self.assertIn("(6.00x)", urr.update(readme, md, "pytorch"))

    def test_a_run_with_cpu_times_shows_them_and_one_without_does_not(self):
        md = self.tr.render_against(TORCH_RUN, LAB_RUN, True)
        self.assertNotIn("CPU us", md)  # the saved runs of before: tables unchanged
        run = dict(TORCH_RUN, results=[dict(r, host_us=12.4) if r["implementation"] == "SDPA" else r
                                       for r in TORCH_RUN["results"]])
        md = self.tr.render_against(run, LAB_RUN, True)
        self.assertIn("| torch eager ms (ratio; CPU us a call) | SDPA ms (ratio; CPU us a call) |", md)
        self.assertIn("| t | 8x8 | `optimized_t` | 0.5 | 3 (6.00x; -) | 1 (2.00x; 12) |", md)
        self.assertNotIn("outran", md)

    def test_a_call_whose_cpu_time_outran_the_spin_is_marked(self):
        # 311 us of CPU work behind a spin of 202 us (the runs before spin_us): marked; 150 us behind
        # it, or 311 us behind a recorded spin of 622 us: not.
        run = dict(TORCH_RUN, results=[dict(TORCH_RUN["results"][0], host_us=311.0),
                                       dict(TORCH_RUN["results"][1], host_us=150.0)])
        md = self.tr.render_against(run, LAB_RUN, True)
        self.assertIn("| 3 (6.00x; 311*) | 1 (2.00x; 150) |", md)
        self.assertIn("outran the GPU's spin", md)
        run["results"][0]["spin_us"] = 622.0
        md = self.tr.render_against(run, LAB_RUN, True)
        self.assertIn("| 3 (6.00x; 311) | 1 (2.00x; 150) |", md)
        self.assertNotIn("outran", md)

    def test_no_common_shape_is_an_error(self):
        with self.assertRaises(ValueError):
            self.tr.render_against(TORCH_RUN, {"rows": []}, False)


    def test_an_oom_row_is_left_out_of_the_pairs(self):
        run = dict(TORCH_RUN, results=TORCH_RUN["results"] + [
            {"topic": "t", "shape": "8x8", "implementation": "torch.compile", "ms": None, "status": "OOM"}])
        names = [n for n, *_ in self.tr.against_lab(run, LAB_RUN)[1][4]]
        self.assertEqual(names, ["torch eager", "SDPA"])


class GbenchTable(unittest.TestCase):
    """tools/gbench_table.py: programs' Google Benchmark JSON runs beside a torch_reference run."""

    @staticmethod
    def run_file(d, name, times):  # {shape: (time, unit)}
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump({"benchmarks": [{"name": "attention/p/%s/manual_time_median" % s, "aggregate_name": "median",
                                       "real_time": t, "time_unit": u} for s, (t, u) in times.items()] +
                       [{"name": "attention/p/8x8/manual_time_mean", "aggregate_name": "mean", "real_time": 99.0,
                         "time_unit": "us"}]}, f)
        return path

    def test_means_each_labels_runs_and_sets_them_beside_pytorch(self):
        import gbench_table

        with tempfile.TemporaryDirectory() as d:
            a1 = self.run_file(d, "a1.json", {"8x8": (10.0, "us"), "16x16": (2.0, "ms")})
            a2 = self.run_file(d, "a2.json", {"8x8": (12.0, "us"), "16x16": (2.2, "ms")})
            b = self.run_file(d, "b.json", {"8x8": (5.5, "us"), "16x16": (2500.0, "us")})
            t = os.path.join(d, "t.json")
            with open(t, "w") as f:
                json.dump({"results": [{"shape": "8x8", "implementation": "SDPA", "ms": 0.011},
                                       {"shape": "16x16", "implementation": "SDPA", "ms": 1.0},
                                       {"shape": "8x8", "implementation": "eager", "ms": 1.0}]}, f)
            md = os.path.join(d, "t.md")
            rc = gbench_table.main(["--run", "a=" + a1, "--run", "a=" + a2, "--run", "b=" + b, "--torch", t,
                                    "--torch-impl", "SDPA", "--baseline", "a", "--markdown", md])
            self.assertEqual(rc, 0)
            text = open(md).read()
            self.assertTrue(text.startswith("Measured by `tools/gbench_table.py --run a=a1.json"))
            self.assertIn("| 8x8 | 11 | **5.5** | 11 | 2.00x | 2.00 |", text)  # (10 + 12) / 2 = 11 us
            self.assertIn("| 16x16 | **2100** | 2500 | 1000 | 0.84x | 0.40 |", text)
            self.assertLess(text.index("| 8x8 |"), text.index("| 16x16 |"))
            readme = "a\n<!-- results:x:begin -->\nold\n<!-- results:x:end -->\n"
            self.assertIn("**5.5**", urr.update(readme, text, "x"))
            # a shape one run lacks, an unknown baseline, a bad --run: one line, status 2
            c = self.run_file(d, "c.json", {"8x8": (1.0, "us")})
            for args in (["--run", "a=" + a1, "--run", "c=" + c, "--baseline", "a"],
                         ["--run", "a=" + a1, "--baseline", "z"], ["--run", a1, "--baseline", "a"]):
                self.assertEqual(gbench_table.main(args + ["--torch", t, "--torch-impl", "SDPA"]), 2)


class TorchAgainstGpt2Report(unittest.TestCase):
    """--lab with demo_gpt2_report's CSV: each implementation's ms at each phase PyTorch timed, OOM and
    N/A cells left out, and a file of another vocabulary refused (its parameter count)."""

    CSV = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "ch04_compile_vs_fused", "tests", "data", "gpt2_report_resume.csv")

    def torch_run(self, vocab=10000):
        return {"tool": "cuda-perf-lab torch_reference", "device": "Some GPU", "torch": "2.x", "results": [
            {"topic": "gpt2_step", "shape": "2x64x4x16x4x%dx%d" % (vocab, p), "implementation": "torch eager",
             "ms": 2.0 * p} for p in (1, 2, 3)] + [
            {"topic": "gpt2_step", "shape": "2x64x4x64x4x%dx1" % vocab, "implementation": "torch eager", "ms": 9.0}]}

    def test_each_ok_cell_is_paired_with_pytorch_at_its_phase(self):
        import torch_reference

        t = self.torch_run()
        lab = torch_reference.read_lab_run(self.CSV, t)
        got = [(r[1], r[2], round(r[3], 6), round(r[4][0][2], 6)) for r in torch_reference.against_lab(t, lab)]
        # tiny:16 in the file: forward vanilla 1.25 and fused 0.5 ms; fwd_bwd vanilla 3.0 (fused OOM);
        # full step fused 4.0 (vanilla N/A). tiny:32 is not in the PyTorch run, context 64 not in the file.
        self.assertEqual(got, [("2x64x4x16x4x10000x1", "gpt2_step_fused", 0.5, 4.0),
                               ("2x64x4x16x4x10000x1", "gpt2_step_vanilla", 1.25, 1.6),
                               ("2x64x4x16x4x10000x2", "gpt2_step_vanilla", 3.0, round(4.0 / 3.0, 6)),
                               ("2x64x4x16x4x10000x3", "gpt2_step_fused", 4.0, 1.5)])
        md = torch_reference.render_against(t, lab, True)
        self.assertIn("and `demo_gpt2_report` (`gpt2_report_resume.csv`)", md)
        self.assertIn("| gpt2_step | 2x64x4x16x4x10000x3 | `gpt2_step_fused` | 4 | 6 (1.50x) |", md)

    def test_a_report_of_another_vocabulary_is_refused(self):
        import torch_reference

        with self.assertRaisesRegex(ValueError, "line 2: 1445632 parameters, where the PyTorch shape "
                                                "2x64x4x16x4x5000x1 has 805632"):
            torch_reference.read_lab_run(self.CSV, self.torch_run(vocab=5000))

    def test_a_run_of_two_vocabularies_pairs_each_configuration_with_its_own(self):
        import torch_reference

        t = self.torch_run()
        both = dict(t, results=self.torch_run(vocab=5000)["results"] + t["results"])
        pairs = lambda run: [(r[1], r[2], r[3], r[4][0][1]) for r in torch_reference.against_lab(
            run, torch_reference.read_lab_run(self.CSV, run))]
        self.assertEqual(pairs(both), pairs(t))
        self.assertEqual(len(pairs(t)), 4)

    def test_runs_side_by_side_are_one_run_of_one_kind_of_gpu(self):
        import torch_reference

        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, device in enumerate(["Some GPU", "Some GPU", "Other GPU"]):
                run = dict(self.torch_run(), device=device)
                run["results"] = run["results"][i:i + 1]
                paths.append(os.path.join(d, "t%d.json" % i))
                with open(paths[-1], "w") as f:
                    json.dump(run, f)
            both = torch_reference.read_torch_runs(paths[:2])
            self.assertEqual([r["shape"] for r in both["results"]], ["2x64x4x16x4x10000x1", "2x64x4x16x4x10000x2"])
            with self.assertRaisesRegex(ValueError, "t2.json: PyTorch 2.x on Other GPU, where .*t0.json has "
                                                    "PyTorch 2.x on Some GPU"):
                torch_reference.read_torch_runs(paths)

    def test_a_csv_of_something_else_is_refused(self):
        import torch_reference

        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("a,b\n1,2\n")
        try:
            with self.assertRaisesRegex(ValueError, "not written by demo_gpt2_report"):
                torch_reference.read_lab_run(f.name, self.torch_run())
        finally:
            os.unlink(f.name)


H200 = "ch04_compile_vs_fused/results/pytorch_compile_h200"
BF16_H200 = "ch04_compile_vs_fused/results/gpt2_bf16_h200"
IN_FLIGHT_H200 = "ch04_compile_vs_fused/results/gpt2_bf16_h200_in_flight"
PHASES_H200 = "ch04_compile_vs_fused/results/gpt2_bf16_h200_phases"
KEEP_LN_H200 = "ch04_compile_vs_fused/results/gpt2_bf16_h200_keep_ln"
LOSS_IN_FLIGHT_H200 = "ch04_compile_vs_fused/results/gpt2_bf16_h200_loss_in_flight"
ROUND_AHEAD_H200 = "ch04_compile_vs_fused/results/gpt2_bf16_h200_round_ahead"
QKV_ROWS_H200 = "ch04_compile_vs_fused/results/gpt2_bf16_h200_qkv_rows"


class TorchAgainstLabReadmes(unittest.TestCase):
    """The READMEs' PyTorch tables made by torch_reference --from --lab are what the tool writes from
    the committed runs (no number typed by hand)."""

    TABLES = [  # README, section, PyTorch's run(s), the lab's run (paths from the repository's root)
        ("ch02_profiling/README.md", "pytorch", "ch02_profiling/results/torch_h100.json",
         "ch02_profiling/results/compare_h100.json"),
        ("ch03_kernels/README.md", "weighted-sum-pytorch", "ch03_kernels/results/torch_weighted_sum_h100.json",
         "ch03_kernels/results/weighted_sum_compare_h100.json"),
        ("ch03_kernels/README.md", "weighted-sum-backward-pytorch",
         "ch03_kernels/results/torch_weighted_sum_backward_h100.json",
         "ch03_kernels/results/weighted_sum_backward_compare_h100.json"),
    ] + [(readme, section, ["%s/%s" % (H200, t) for t in torch_runs], "%s/%s" % (H200, lab))
         for readme, section, torch_runs, lab in [
        ("ch04_compile_vs_fused/attention/README.md", "pytorch-compile-h200", ["torch_attention_forward.json"],
         "compare_attention.json"),
        ("ch04_compile_vs_fused/attention/README.md", "pytorch-compile-backward-h200",
         ["torch_attention_backward.json"], "compare_attention_backward.json"),
        ("ch04_compile_vs_fused/gpt2/README.md", "pytorch-compile-h200-a",
         ["torch_gpt2_fp32_small.json", "torch_gpt2_fp32_medium.json"], "report_fp32_small_medium.csv"),
        ("ch04_compile_vs_fused/gpt2/README.md", "pytorch-compile-h200-b",
         ["torch_gpt2_fp32_xl.json", "torch_gpt2_fp32_2.7B.json"], "report_fp32_xl_2.7B.csv"),
    ]] + [("ch04_compile_vs_fused/gpt2/README.md", section, ["%s/%s" % (BF16_H200, t) for t in torch_runs],
           "%s/%s" % (BF16_H200, lab))
          for section, torch_runs, lab in [
        ("gpt2-bf16-h200", ["torch_bf16_small.json", "torch_bf16_medium.json", "torch_bf16_xl.json"],
         "report_bf16.csv"),
        ("gpt2-bf16-v50304-h200", ["torch_bf16_small_v50304.json"], "report_bf16_v50304.csv"),
    ]] + [("ch04_compile_vs_fused/gpt2/README.md", section, ["%s/%s" % (IN_FLIGHT_H200, t) for t in torch_runs],
           "%s/%s" % (IN_FLIGHT_H200, lab))
          for section, torch_runs, lab in [
        ("gpt2-bf16-in-flight-h200", ["torch_bf16.json"], "report_bf16.csv"),
        ("gpt2-bf16-in-flight-v50304-h200", ["torch_bf16_v50304.json"], "report_bf16_v50304.csv"),
    ]] + [("ch04_compile_vs_fused/gpt2/README.md", "gpt2-bf16-phases-small-h200",
           ["%s/%s" % (PHASES_H200, t) for t in ["torch_ro_step.json", "torch_ro_forward.json",
                                                 "torch_ro_fwd_bwd.json", "torch_ma_step.json"]],
           "%s/report_small.csv" % PHASES_H200)
    ] + [("ch04_compile_vs_fused/gpt2/README.md", section, ["%s/%s" % (KEEP_LN_H200, t) for t in torch_runs],
           "%s/%s" % (KEEP_LN_H200, lab))
          for section, torch_runs, lab in [
        ("gpt2-bf16-keep-ln-h200", ["torch_bf16.json"], "report_bf16.csv"),
        ("gpt2-bf16-keep-ln-v50304-h200", ["torch_bf16_v50304.json"], "report_bf16_v50304.csv"),
    ]] + [("ch04_compile_vs_fused/gpt2/README.md", "gpt2-bf16-loss-in-flight-h200",
          "%s/torch_bf16_small.json" % LOSS_IN_FLIGHT_H200, "%s/report_bf16.csv" % LOSS_IN_FLIGHT_H200)] + [
        ("ch04_compile_vs_fused/gpt2/README.md", section, "%s/torch_bf16_all.json" % ROUND_AHEAD_H200,
         "%s/%s" % (ROUND_AHEAD_H200, lab))
        for section, lab in [("gpt2-bf16-round-ahead-h200", "report_bf16.csv"),
                             ("gpt2-bf16-round-ahead-v50304-h200", "report_bf16_v50304.csv")]] + [
        ("ch04_compile_vs_fused/gpt2/README.md", "gpt2-bf16-qkv-rows-h200", "%s/torch_bf16.json" % QKV_ROWS_H200,
         "%s/report_bf16.csv" % QKV_ROWS_H200)]

    def test_each_table_is_the_tools_output(self):
        import torch_reference

        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        for readme, section, torch_runs, lab_run in self.TABLES:
            if isinstance(torch_runs, str):
                torch_runs = [torch_runs]
            t = torch_reference.read_torch_runs([os.path.join(root, r) for r in torch_runs])
            lab = torch_reference.read_lab_run(os.path.join(root, lab_run), t)
            got = readme_section(os.path.join(root, readme), section)
            self.assertEqual(got, torch_reference.render_against(t, lab, True).strip(), (readme, section))


class TorchGpt2(unittest.TestCase):
    """The PyTorch check's errors, which need neither PyTorch nor a GPU."""

    def run_tool(self, *args):
        import subprocess

        tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_gpt2.py")
        return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)

    def test_a_folder_without_a_dump_is_exit_2_with_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_tool("--check", d)
        self.assertEqual(r.returncode, 2)
        self.assertIn("torch_gpt2: error:", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_a_manifest_from_elsewhere_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "gpt2_dump.json"), "w") as f:
                json.dump({"format": 7}, f)
            r = self.run_tool("--check", d)
        self.assertEqual(r.returncode, 2)
        self.assertIn("demo_gpt2_report --dump", r.stderr)

    def test_check_is_required(self):
        r = self.run_tool()
        self.assertEqual(r.returncode, 2)
        self.assertIn("--check", r.stderr)



class PlantedBugs(unittest.TestCase):
    """planted_bugs.sh replaces a text in a source; when the source moves on, the bug would silently
    not be planted. --check-patterns finds every text exactly once, without a GPU or a build."""

    SCRIPT = os.path.join(os.path.dirname(HERE), "planted_bugs.sh")
    ROOT = os.path.dirname(os.path.dirname(HERE))

    def run_script(self, script):
        return subprocess.run(["bash", script, "--check-patterns"], capture_output=True, text=True)

    def test_every_text_occurs_once(self):
        r = self.run_script(self.SCRIPT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"planted_bugs: (\d+) of \1 texts found once")

    def test_a_text_gone_from_its_source_is_reported(self):
        with open(self.SCRIPT) as f:
            files = sorted(set(re.findall(r"^\s*plant \S+ (\S+) ", f.read(), re.M)))  # in a loop too
        self.assertIn("ch03_kernels/optimized_cross_entropy.cu", files)
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "tools"))
            shutil.copy(self.SCRIPT, os.path.join(d, "tools"))
            for rel in files:
                os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
                shutil.copy(os.path.join(self.ROOT, rel), os.path.join(d, rel))
            script = os.path.join(d, "tools", "planted_bugs.sh")
            self.assertEqual(self.run_script(script).returncode, 0)  # the copy is complete
            path = os.path.join(d, "ch03_kernels/optimized_cross_entropy.cu")
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(text.replace("row_lse - picked", "row_lse-picked"))
            r = self.run_script(script)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("label_logit(ch03_kernels/optimized_cross_entropy.cu: the text to replace occurs 0 times", r.stdout)


    def test_the_readme_counts_the_bugs_there_are(self):
        # The top README says how many bugs the script plants; a bug added or dropped changes it.
        r = subprocess.run(["bash", self.SCRIPT, "--list"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        planted = int(re.search(r"planted_bugs: (\d+) to plant", r.stdout + r.stderr).group(1))
        with open(os.path.join(self.ROOT, "README.md")) as f:
            said = re.search(r"# the checks checked: (\d+) known bugs", f.read())
        self.assertIsNotNone(said, "README.md no longer says how many bugs tools/planted_bugs.sh plants")
        self.assertEqual(int(said.group(1)), planted, "README.md's count of planted bugs is stale")


class PlantedBugScales(unittest.TestCase):
    """--scales plants each perturbation bug at smaller factors (the sensitivity table of issue
    #44); --list shows what would be planted, without a build."""

    SCRIPT = PlantedBugs.SCRIPT

    def listing(self, *args):
        return subprocess.run(["bash", self.SCRIPT, "--list", *args], capture_output=True, text=True)

    def test_a_raising_and_a_lowering_factor_are_scaled_both_ways(self):
        r = self.listing("--scales", "1.01,1.003", "attn_tc_forward_1pct", "gpt2_grads_gelu_bias")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertIn("attn_tc_forward_1pct@1.01 optimized_attention_fused_tc: = make_float2(a, 1.01f * b);", lines)
        self.assertIn("attn_tc_forward_1pct@1.003 optimized_attention_fused_tc: = make_float2(a, 1.003f * b);", lines)
        self.assertIn("gpt2_grads_gelu_bias@1.003 ch04_kernels: s.x += 0.997f * v.x, s.y += v.y", lines)
        self.assertIn("planted_bugs: 2 to plant, each at 2 scales", lines)

    def test_only_perturbations_are_scaled(self):
        r = self.listing("--scales", "1.003")
        self.assertEqual(r.returncode, 0, r.stderr)
        names = {l.split("@")[0] for l in r.stdout.splitlines() if "@" in l}
        self.assertIn("attn_wgmma_backward_1pct", names)
        self.assertIn("gpt2_bf16_fc_1pct", names)
        self.assertNotIn("gpt2_weight_decay", names)  # 10%: not a 1% factor
        self.assertNotIn("causal_fp32", names)
        self.assertTrue(all("1.01f" not in l and "0.99f" not in l for l in r.stdout.splitlines() if "@" in l))

    def test_the_scales_run_until_one_is_missed_and_the_table_says_so(self):
        # A stand-in for cmake: configuring makes the build folder; building PROGRAM writes a
        # program whose check "catches" the planted O factor only at 1.003 and above.
        with tempfile.TemporaryDirectory() as d:
            rel = "ch04_compile_vs_fused/attention/kernels/mma_tiles.cuh"
            os.makedirs(os.path.join(d, "root", "tools"))
            os.makedirs(os.path.dirname(os.path.join(d, "root", rel)))
            shutil.copy(self.SCRIPT, os.path.join(d, "root", "tools"))
            shutil.copy(os.path.join(PlantedBugs.ROOT, rel), os.path.join(d, "root", rel))
            fake = os.path.join(d, "bin")
            os.makedirs(fake)
            with open(os.path.join(fake, "cmake"), "w") as f:
                f.write("""#!/bin/bash
if [ "$1" = "-S" ]; then mkdir -p "$4"; exit 0; fi
build=$2; prog=${@: -1}; src="$build/../%s"
printf '#!/bin/bash\\ngrep -qE "(1[.]01f|1[.]003f) [*] b" "%%s" && exit 1; exit 0\\n' "$src" > "$build/$prog"
chmod +x "$build/$prog"
""" % rel)
            os.chmod(os.path.join(fake, "cmake"), 0o755)
            env = dict(os.environ, PATH=fake + os.pathsep + os.environ["PATH"], TMPDIR=d)
            logs = os.path.join(d, "logs")
            r = subprocess.run(["bash", os.path.join(d, "root", "tools", "planted_bugs.sh"), logs, "--scales",
                                "1.01,1.003,1.001,1.0003", "attn_tc_forward_1pct"],
                               capture_output=True, text=True, env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)  # caught at the first scale
            self.assertEqual(r.stdout.count("caught (exit 1)"), 2, r.stdout)
            self.assertEqual(r.stdout.count("MISSED"), 1, r.stdout)  # 1.001; 1.0003 not tried
            self.assertNotIn("1.0003f", r.stdout)
            with open(os.path.join(logs, "sensitivity.md")) as f:
                table = f.read()
            self.assertTrue(table.startswith("Measured by `tools/planted_bugs.sh --scales 1.01,1.003,1.001,1.0003`"))
            row = [l for l in table.splitlines() if l.startswith("| attn_tc_forward_1pct |")]
            self.assertEqual(len(row), 1, table)
            self.assertTrue(row[0].endswith("| 1.003 |"), row[0])
            self.assertEqual(row[0].split(" | ")[2:], ["caught", "caught", "MISSED, exit 0", "-", "1.003 |"], row[0])
            self.assertEqual(table.splitlines()[2].count("|"), row[0].count("|"))  # a full row
            with open(os.path.join(d, "root", rel)) as f, open(os.path.join(PlantedBugs.ROOT, rel)) as g:
                self.assertEqual(f.read(), g.read())  # the sources are never touched
            # A log a plant, named without '@' (a character some file transfers refuse).
            self.assertIn("attn_tc_forward_1pct_at_1.003.log", os.listdir(logs))
            self.assertFalse([n for n in os.listdir(logs) if "@" in n], os.listdir(logs))

    def test_a_bad_scale_is_refused(self):
        for bad in ("1.0", "0.99", "1.5x", "", "1.0000001"):
            r = self.listing("--scales", bad)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--scales", r.stderr)


class BridgeTestRunner(unittest.TestCase):
    """python/tests/run.py names everything the bridge's tests lack, not only the first thing."""

    def load(self):
        path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python", "tests", "run.py")
        spec = importlib.util.spec_from_file_location("bridge_run", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def test_names_every_missing_piece(self):
        mod = self.load()
        real = importlib.util.find_spec
        try:
            mod.importlib.util.find_spec = lambda name, *a: None  # nothing installed
            lacking = mod.missing()
        finally:
            mod.importlib.util.find_spec = real
        text = "; ".join(lacking)
        self.assertIn("pytest is not installed", text)
        self.assertIn("PyTorch is not installed", text)
        if not mod.glob.glob(os.path.join(os.path.dirname(mod.HERE), "cuda_perf_lab", "_C*.so")):
            self.assertIn("cuda_perf_lab is not built", text)

    def test_one_line_that_ctest_reads_as_a_skip(self):
        if not self.load().missing():
            self.skipTest("nothing is missing here: the bridge's tests would run (bridge.pytest runs them)")
        path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python", "tests", "run.py")
        r = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("bridge tests skipped: "), r.stdout)
        self.assertEqual(len(r.stdout.strip().splitlines()), 1, r.stdout)


class CheckTestLabels(unittest.TestCase):
    """tools/check_test_labels.py (the CPU test tools.test_labels) on made-up ctest listings: each
    mislabelled test is named, a correct listing passes."""

    @staticmethod
    def listed(name, *labels):
        return {"name": name, "properties": [{"name": "LABELS", "value": list(labels)}]}

    def setUp(self):
        import check_test_labels
        self.problems = check_test_labels.problems
        self.good = [self.listed("ch02.Fuzz.optimized_square", "ch02", "fuzz", "gpu"),
                     self.listed("ch02.square.optimized_square/1024", "ch02", "gpu"),
                     self.listed("ch02.optimized_square.help", "ch02", "cpu"),
                     self.listed("tools.python", "cpu")]

    def test_correct_labels_pass(self):
        self.assertEqual(self.problems(self.good), [])

    def test_the_old_flattened_labels_fail(self):
        # What gtest_discover_tests made of PROPERTIES LABELS "gpu;fuzz;ch02": the label gpu alone.
        tests = self.good + [self.listed("ch03.Fuzz.optimized_gelu", "gpu")]
        found = self.problems(tests)
        self.assertEqual(len(found), 2, found)  # no ch03, no fuzz
        self.assertTrue(all(line.startswith("ch03.Fuzz.optimized_gelu:") for line in found), found)

    def test_each_rule(self):
        cases = [(self.listed("ch01.x", "ch01"), "exactly one of cpu and gpu"),
                 (self.listed("ch01.x", "ch01", "cpu", "gpu"), "exactly one of cpu and gpu"),
                 (self.listed("ch01.x", "gpu"), "no ch01"),
                 (self.listed("ch01.x", "ch01", "gpu", "fuzz"), "not a chapter's fuzz"),
                 ({"name": "ch01_fuzz_NOT_BUILT"}, "not built")]
        for test, why in cases:
            found = self.problems(self.good + [test])
            self.assertEqual(len(found), 1, (test, found))
            self.assertIn(why, found[0])

    def test_no_fuzz_test_listed_fails(self):
        found = self.problems([t for t in self.good if ".Fuzz." not in t["name"]])
        self.assertEqual(found, ["no chNN.Fuzz.* test listed: `ctest -L fuzz` would run nothing"])


if __name__ == "__main__":
    unittest.main()
