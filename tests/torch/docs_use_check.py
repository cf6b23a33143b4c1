# docs/pytorch.md's "Use" example, run as the page gives it (under torchrun), then
# its tensor checked: all_reduce twice over the world (x n each) and once over the
# group of ranks 0 and 1 (x 2 there).
import os
import pathlib
import sys

doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "pytorch.md"
text = doc.read_text()
code = text[text.index("## Use"):]
code = code[code.index("```python") + len("```python"):]
code = code[: code.index("```")]
ns = {}
exec(compile(code, f"{doc} (## Use)", "exec"), ns)
n, r = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
want = float(n * n * (2 if r in (0, 1) else 1))
got = ns["t"].tolist()
if got != [want] * 4:
    sys.exit(f"docs_use_check: rank {r}: t = {got}, expected {[want] * 4}")
print(f"docs_use_check: rank {r} of {n}: t = {got} as expected")
