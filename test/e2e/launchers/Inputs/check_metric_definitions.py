#!/usr/bin/python3
"""check_metric_definitions.py REQUEST OUTPUT NAME...: feeds a program's real output
through the MetricDefinitions of a SageMaker CreateTrainingJob request, as CloudWatch
applies them (each regex to each line, the first group a number). Every definition
must capture numbers only; each NAME given must match at least one line. Prints what
each definition captured."""
import json
import re
import sys


def main():
    request = json.load(open(sys.argv[1]))
    lines = open(sys.argv[2]).read().splitlines()
    expected = set(sys.argv[3:])
    ok = True
    for d in request["AlgorithmSpecification"]["MetricDefinitions"]:
        regex = re.compile(d["Regex"])
        values = []
        for line in lines:
            m = regex.search(line)
            if m:
                values.append(float(m.group(1)))  # a number, or this raises
        print(f"{d['Name']}: {len(values)} values"
              + (f", last {values[-1]:g}" if values else ""))
        if d["Name"] in expected and not values:
            print(f"  expected {d['Name']} in the output")
            ok = False
        expected.discard(d["Name"])
    if expected:
        print(f"no definitions for {' '.join(sorted(expected))}")
        ok = False
    sys.exit(0 if ok else 1)


main()
