import json,sys,statistics as st,collections
rows=[json.loads(l) for l in open(sys.argv[1])]
d=collections.defaultdict(list)
for r in rows:
    if r.get("time_us") is None: continue
    d[(r["class"],r["ranks"],r["busy"],r["size"],r["library"].split()[-1])].append(r["time_us"])
libs=["prebusy","main","fix"]
for cls in ("tcp","shm"):
  for rk in sorted({k[1] for k in d}):
    print(f"\n{cls}, {rk} ranks")
    print("| size | "+" | ".join(f"{l} K={k}" for k in (0,2) for l in libs)+" |")
    for s in sorted({k[3] for k in d if k[0]==cls and k[1]==rk}):
        cells=[]
        for k in (0,2):
            for l in libs:
                v=d.get((cls,rk,k,s,l))
                cells.append(f"{st.median(v):,.3g} ({len(v)})" if v else "-")
        print(f"| {s} | "+" | ".join(cells)+" |")
