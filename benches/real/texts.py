#!/usr/bin/env python3
"""Gathers real English text for the real-model vector corpus of the grid benchmark.

Writes `<out>/texts.txt` (passages, one per line) and `<out>/queries.txt` (query texts, one
per line), each deduplicated and in a fixed order, so that embedding them gives the same
corpus on every machine.

Sources, each read by path and never copied into the repository:
* LoCoMo (`--locomo`, the JSON file): every turn's text as a passage ("speaker: text"),
  every question as a query;
* MADial-Bench English (`--madial`, its `en` directory): every memory's event and every
  dialogue line as passages;
* the repository's own `data/` (observe and scenario JSON lines): every `summary`, `text`
  and `query` value as a passage;
* WordNet 3.0 (Debian's `wordnet-base` package, `/usr/share/wordnet/data.*`): every
  synset's gloss split into its definition and its quoted examples, each a passage; every
  tenth example is a query instead (a sentence a passage does not hold verbatim).
"""

import argparse
import json
import pathlib
import re


def locomo(path):
    passages, queries = [], []
    for conv in json.loads(pathlib.Path(path).read_text()):
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            for turn in c[f"session_{n}"]:
                passages.append(f"{turn['speaker']}: {turn['text']}")
            n += 1
        queries.extend(q["question"] for q in conv["qa"])
    return passages, queries


def madial(root):
    root = pathlib.Path(root)
    passages = []
    for line in (root / "MADial-Bench-en-memory.jsonl").read_text().splitlines():
        for memory in json.loads(line).values():
            passages.append(memory["event"])
    for line in (root / "MADial-Bench-en-dialogue.jsonl").read_text().splitlines():
        for said in json.loads(line)["dialogue"]:
            said = said.strip()
            if said and not said.startswith("<BOD>") and not said.startswith("<EOD>"):
                passages.append(said.replace("<", "").replace(">", "").replace('"', ""))
    return passages


def own_data(root):
    passages = []
    for file in sorted(pathlib.Path(root).rglob("*.jsonl")):
        for line in file.read_text().splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue

            def walk(v):
                if isinstance(v, dict):
                    for k, x in v.items():
                        if k in ("summary", "text", "query") and isinstance(x, str):
                            passages.append(x)
                        else:
                            walk(x)
                elif isinstance(v, list):
                    for x in v:
                        walk(x)

            walk(json.loads(line))
    return passages


def wordnet(root):
    passages, queries = [], []
    seen_examples = 0
    for part in ("noun", "verb", "adj", "adv"):
        for line in (pathlib.Path(root) / f"data.{part}").read_text(errors="replace").splitlines():
            if line.startswith("  ") or "|" not in line:
                continue
            gloss = line.split("|", 1)[1].strip()
            examples = re.findall(r'"([^"]+)"', gloss)
            definition = re.sub(r'"[^"]*"', "", gloss).strip(" ;")
            if definition:
                passages.append(definition)
            for e in examples:
                seen_examples += 1
                (queries if seen_examples % 10 == 0 else passages).append(e.strip())
    return passages, queries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--locomo", required=True)
    ap.add_argument("--madial", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--wordnet", default="/usr/share/wordnet")
    a = ap.parse_args()
    passages, queries = locomo(a.locomo)
    passages += madial(a.madial)
    passages += own_data(a.data)
    wp, wq = wordnet(a.wordnet)
    passages += wp
    queries += wq

    def unique(texts):
        seen, out = set(), []
        for t in texts:
            t = " ".join(t.split())
            if len(t) >= 3 and t not in seen:
                seen.add(t)
                out.append(t)
        return out

    passages = unique(passages)
    held = set(passages)
    queries = [q for q in unique(queries) if q not in held]
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "texts.txt").write_text("\n".join(passages) + "\n")
    (out / "queries.txt").write_text("\n".join(queries) + "\n")
    print(f"{len(passages)} passages, {len(queries)} queries in {out}")


if __name__ == "__main__":
    main()
