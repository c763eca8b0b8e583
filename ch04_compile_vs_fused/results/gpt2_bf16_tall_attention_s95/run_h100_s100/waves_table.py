"""The table in ../README.md's session-100 section, from waves_1.csv and waves_2.csv (next_s99.sh waves):
step 20's time over step 22's for each row and round, beside the share of the rounds' block slots that
step 22's product fills (next_s99.sh's header: 128 x 128 tiles of tokens x 4d, one block an SM, 132 SMs)."""
import csv
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
D = {"medium": 1024, "xl": 1600}
SMS, TILE, BATCH = 132, 128, 4


def fill(size, ctx):
    tiles = math.ceil(BATCH * ctx / TILE) * math.ceil(4 * D[size] / TILE)
    return tiles / (math.ceil(tiles / SMS) * SMS)


def ratio(row, phase):
    return float(row[phase + "_fused_bf16_ln_grads_ms"]) / float(row[phase + "_fused_bf16_gelu_forward_in_product_ms"])


print("Measured by `demo_gpt2_report` (next_s99.sh waves, twice) on an NVIDIA H100 80GB HBM3 in session 100; "
      "the ratios by run_h100_s100/waves_table.py. A ratio below 1: step 22 slower.\n")
rounds = [list(csv.DictReader(open(os.path.join(HERE, "waves_%d.csv" % i)))) for i in (1, 2)]
print("| model:context | fill | forward, step 20 / step 22 (rounds 1, 2) | full step, step 20 / step 22 (rounds 1, 2) "
      "| full step ms, step 20 and step 22 (round 1) |")
print("| --- | ---: | ---: | ---: | ---: |")
for a, b in zip(*rounds):
    size, ctx = a["model_size"], int(a["context_length"])
    print("| %s:%d | %.2f | %.3f, %.3f | %.3f, %.3f | %.2f, %.2f |" % (
        size, ctx, fill(size, ctx), ratio(a, "forward"), ratio(b, "forward"), ratio(a, "full_step"),
        ratio(b, "full_step"), float(a["full_step_fused_bf16_ln_grads_ms"]),
        float(a["full_step_fused_bf16_gelu_forward_in_product_ms"])))
