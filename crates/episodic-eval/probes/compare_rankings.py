"""Paired comparison of two LoCoMo rankings files (`episodic-eval locomo --rankings`), e.g. of
two models: recall@k of the default rankings, per half and for multi-hop, with the paired
difference (B minus A) and its 95% bootstrap half-width (1,000 resamples, fixed seed).

Usage: python3 compare_rankings.py A.jsonl B.jsonl [LOCOMO10.json]
"""
import json
import random
import re
import sys


def norm_id(t):
    t = re.sub(r"^D:(\d+):", r"D\1:", t.strip())
    m = re.match(r"^D(\d+):(\d+)$", t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def questions(path):
    """(half, category, gold turn keys) per question, in the eval's order."""
    out = []
    for i, conv in enumerate(json.load(open(path))):
        c = conv["conversation"]
        turns = {norm_id(t["dia_id"]) for k, v in c.items()
                 if k.startswith("session_") and isinstance(v, list) for t in v}
        for q in conv["qa"]:
            gold = {k for ev in q.get("evidence", []) for p in re.split(r"[;,\s]+", ev)
                    if p and (k := norm_id(p)) in turns}
            out.append(("dev" if i < 5 else "test", q.get("category"), gold))
    return out


def recall_at(ranking, gold, k):
    got = {norm_id(i) for i in ranking[:k]}
    return len(got & gold) / len(gold)


def main():
    a = [json.loads(l)["ranking"] for l in open(sys.argv[1])]
    b = [json.loads(l)["ranking"] for l in open(sys.argv[2])]
    qs = questions(sys.argv[3] if len(sys.argv) > 3 else "../shared/data/locomo/locomo10.json")
    assert len(a) == len(b) == len(qs)
    for k in (5, 10):
        for half in ("test", "dev"):
            for cat, name in ((None, "all"), (1, "multi-hop")):
                rows = [(ra, rb, g) for ra, rb, (h, c, g) in zip(a, b, qs)
                        if g and h == half and (cat is None or c == cat)]
                ra = [recall_at(x, g, k) for x, _, g in rows]
                rb = [recall_at(y, g, k) for _, y, g in rows]
                d = [y - x for x, y in zip(ra, rb)]
                random.seed(7)
                means = sorted(sum(random.choice(d) for _ in d) / len(d) for _ in range(1000))
                half_width = (means[974] - means[25]) / 2
                print(f"R@{k} {half:4} {name:9} n={len(rows):4}  A {100 * sum(ra) / len(ra):5.1f}"
                      f"  B {100 * sum(rb) / len(rb):5.1f}  B-A {100 * sum(d) / len(d):+5.1f}"
                      f" ± {100 * half_width:.1f}")


if __name__ == "__main__":
    main()
