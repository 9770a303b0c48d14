#!/usr/bin/env python3
"""Per-operation callgrind costs: (profile at N − profile at 0) ÷ N, per function, self or inclusive.
usage: callgrind-per-op.py BASE.out BIG.out N [--inclusive] [TOP]
BASE.out: a callgrind run of a scenario with 0 operations; BIG.out: the same with N."""
import re, subprocess, sys
from collections import defaultdict

def costs(path, inclusive):
    args = ["callgrind_annotate", "--threshold=100", "--tree=none", "--auto=no"] + (["--inclusive=yes"] if inclusive else []) + [path]
    text = subprocess.run(args, capture_output=True, text=True).stdout
    text = subprocess.run(["swift", "demangle", "--simplified"], input=text, capture_output=True, text=True).stdout
    total, out = 0, defaultdict(int)
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)$", line)
        if not m: continue
        n, name = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in name: total = n; continue
        name = re.sub(r"^\S*?:(?=\S)", "", name, count=1) if name.startswith(("???:", "./")) else name
        name = re.sub(r" \[/.*?([^/]+)\]$", r" [\1]", name)
        out[name] += n
    return total, out

base, big, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
inclusive = "--inclusive" in sys.argv
top = int([a for a in sys.argv[4:] if a.isdigit()][0]) if any(a.isdigit() for a in sys.argv[4:]) else 30
t0, c0 = costs(base, inclusive)
t1, c1 = costs(big, inclusive)
print(f"total per op: {(t1 - t0) / n:,.0f} instructions ({'inclusive' if inclusive else 'self'} costs below, per op)")
rows = sorted(((c1[k] - c0.get(k, 0)) / n, k) for k in c1)
for v, k in reversed(rows[-top:]):
    print(f"{v:12,.0f}  {k[:230]}")
