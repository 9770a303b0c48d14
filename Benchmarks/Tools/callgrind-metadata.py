#!/usr/bin/env python3
"""Generic metadata looked up per op: which type accessors, called from where.

usage: callgrind-metadata.py TREE N [min_per_op]
TREE: `callgrind_annotate --tree=caller --threshold=100 --inclusive=yes OUT | swift demangle --simplified`
of a run that performed N operations (the scenario's fixed cost is not subtracted)."""
import re, sys
text = open(sys.argv[1]).read(); n = int(sys.argv[2]); floor = float(sys.argv[3]) if len(sys.argv) > 3 else 0.5
for block in text.split("\n\n"):
    lines = block.splitlines()
    star = [l for l in lines if re.match(r"\s*[\d,]+ \([^)]*\)\s+\*\s", l)]
    if not star: continue
    if not ("type metadata accessor for" in star[0] or "swift_getTupleTypeMetadata [" in star[0]): continue
    calls = [(int(m.group(1).replace(',', '')), int(re.match(r"\s*([\d,]+)", l).group(1).replace(',', '')), l.strip())
             for l in lines if (m := re.search(r"<.*\(([\d,]+)x\)", l))]
    tot = sum(c for c, _, _ in calls); cost = sum(i for _, i, _ in calls)
    if tot / n >= floor:
        name = re.sub(r"^\s*[\d,]+ \([^)]*\)\s+\*\s+\?\?\?:", "", star[0])
        print(f"{tot / n:6.1f}/op {cost / n:8,.0f} instr  {name[:110]}")
        for c, i, l in sorted(calls, reverse=True)[:5]:
            if c / n >= floor / 2:
                caller = re.sub(r'^[\d,]+ \([^)]*\)\s+<\s+\?\?\?:', '', l)[:130]
                print(f"          {c / n:5.1f}  from {caller}")
