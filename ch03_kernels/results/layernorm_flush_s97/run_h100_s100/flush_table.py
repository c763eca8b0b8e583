"""The table in ../README.md's session-100 section: the medians of six rounds that ln_flush.py printed
(flushes_16384x768.txt, flushes_8192x4096.txt; next_s99.sh flushes), one column a flush."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
FLUSHES = ("ordinary", "last", "discard", "demote")
print("Measured by `ln_flush.py` (next_s99.sh flushes) on an NVIDIA H100 80GB HBM3 in session 100: medians of six "
      "rounds, us; the table by run_h100_s100/flush_table.py.\n")
print("| shape | form | " + " | ".join(FLUSHES) + " |")
print("| --- | --- |" + " ---: |" * len(FLUSHES))
for shape in ("16384x768", "8192x4096"):
    text = open(os.path.join(HERE, "flushes_%s.txt" % shape)).read().split("medians of the rounds, us:")[1]
    rows = {}
    for line in filter(None, text.splitlines()):  # ln_flush.py prints "  %-14s %-9s %.2f"
        rows.setdefault(line[2:16].strip(), {})[line[17:26].strip()] = line[26:].strip()
    for form, by_flush in rows.items():
        if form == "lab program":  # the C++ program times itself, under its own flush
            print("| %s | the lab's program, its own flush | %s | | | |" % (shape, by_flush["its own"]))
        else:
            print("| %s | %s | %s |" % (shape, form, " | ".join(by_flush[f] for f in FLUSHES)))
