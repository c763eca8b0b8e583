#!/usr/bin/env python3
"""Holds every CTest test to its labels, as the README's commands select them (`ctest -L gpu`,
`ctest -L fuzz`, `ctest -LE fuzz`, `ctest -L ch03`):

- every test has exactly one of the labels cpu and gpu;
- a test named chNN.* has the label chNN;
- the chapters' fuzz tests (chNN.Fuzz.*) have the labels gpu and fuzz, and no other test has fuzz;
- the fuzz binaries' tests are listed at all (a build without them is named, not passed).

It reads `ctest --show-only=json-v1`, which lists the GoogleTest binaries' tests as ctest will run
them. Exit 0 when every test holds, 1 with one line a problem, 2 on bad usage.

  tools/check_test_labels.py BUILD_DIR [CTEST]
"""
import json
import re
import subprocess
import sys

CHAPTER = re.compile(r"^(ch\d\d)\.")
FUZZ = re.compile(r"^ch\d\d\.Fuzz\.")


def problems(tests):
    """The label problems of a ctest json-v1 test list, one line each."""
    found = []
    fuzz_tests = 0
    for t in tests:
        name = t["name"]
        if name.endswith("_NOT_BUILT"):
            found.append("%s: its binary is not built (build every target first)" % name)
            continue
        labels = set()
        for p in t.get("properties", []):
            if p["name"] == "LABELS":
                labels = set(p["value"])
        kinds = labels & {"cpu", "gpu"}
        if len(kinds) != 1:
            found.append("%s: labels %s: want exactly one of cpu and gpu" % (name, sorted(labels)))
        m = CHAPTER.match(name)
        if m and m.group(1) not in labels:
            found.append("%s: labels %s: no %s" % (name, sorted(labels), m.group(1)))
        if FUZZ.match(name):
            fuzz_tests += 1
            if not {"gpu", "fuzz"} <= labels:
                found.append("%s: labels %s: a fuzz test needs gpu and fuzz" % (name, sorted(labels)))
        elif "fuzz" in labels:
            found.append("%s: labels %s: fuzz on a test that is not a chapter's fuzz" % (name, sorted(labels)))
    if not fuzz_tests:
        found.append("no chNN.Fuzz.* test listed: `ctest -L fuzz` would run nothing")
    return found


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    ctest = argv[2] if len(argv) > 2 else "ctest"
    try:
        out = subprocess.run([ctest, "--test-dir", argv[1], "--show-only=json-v1"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print("check_test_labels: %s --test-dir %s --show-only=json-v1 failed: %s" % (ctest, argv[1], e),
              file=sys.stderr)
        return 2
    tests = json.loads(out).get("tests", [])
    found = problems(tests)
    for line in found:
        print(line)
    print("%d tests, %d label problems" % (len(tests), len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
