#!/usr/bin/env python3
"""Holds `dtc --report=json`'s prediction to the running program's: the same
compute and communication a step (and pipeline bubble, in a pipeline), to rounding, when both price the program's
ops with the same cached peaks (the run's first record in timing.jsonl has the
runtime's); and the cost to steps x step x price x hosts.

    check_prediction.py REPORT.json TIMING.jsonl PRICE HOSTS
"""
import json
import sys

report, timing = json.load(open(sys.argv[1])), sys.argv[2]
price, hosts = float(sys.argv[3]), int(sys.argv[4])
p = report["prediction"]
run = [json.loads(l)["run"] for l in open(timing) if '"run"' in l][-1]
for key, theirs in (("compute_s", run["predicted_compute_s"]),
                    ("comm_s", run["predicted_comm_s"]),
                    ("bubble_s", run["predicted_bubble_s"])):
    if abs(p[key] - theirs) > 1e-9 + 1e-6 * theirs:
        sys.exit(f"FAIL: dtc's {key} {p[key]} vs the program's {theirs}")
if abs(p["link_bytes_per_s"] - run["link_bytes_per_s"]) > 1e-6 * run["link_bytes_per_s"]:
    sys.exit(f"FAIL: dtc's link {p['link_bytes_per_s']} vs the run's {run['link_bytes_per_s']}")
usd = p["steps"] * p["step_s"] / 3600 * price * hosts
if len(p["cost"]) != 1 or abs(p["cost"][0]["usd"] - usd) > 1e-12 * max(1.0, usd):
    sys.exit(f"FAIL: cost {p['cost']} vs {usd}")
bubble = f", pipeline bubble {p['bubble_s'] * 1e3:.3f} ms" if "pipeline" in p else ""
print(f"dtc and the program predict the same step: compute {p['compute_s'] * 1e3:.3f} ms, "
      f"communication {p['comm_s'] * 1e3:.3f} ms{bubble}; cost = steps x step x price x hosts")
